r"""ReAct ± CounterMem on Vericoding-Dafny (decision unit: code step), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch vericoding          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/vericoding_dafny_react_gptoss.py --workdir=runs/vericoding_dafny_react_gptoss
    python -m countermem_jax.train_selector --config=configs/vericoding_dafny_react_gptoss.py --workdir=runs/vericoding_dafny_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/vericoding_dafny_react_gptoss.py --workdir=runs/vericoding_dafny_react_gptoss

Needs Dafny 4 (third_party/README.md).

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the ReAct vs ReAct+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("vericoding_dafny", "react", "gptoss")
