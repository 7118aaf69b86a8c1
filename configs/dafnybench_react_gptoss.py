r"""ReAct ± CounterMem on DafnyBench (decision unit: invariant / annotation), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch dafnybench          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/dafnybench_react_gptoss.py --workdir=runs/dafnybench_react_gptoss
    python -m countermem_jax.train_selector --config=configs/dafnybench_react_gptoss.py --workdir=runs/dafnybench_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/dafnybench_react_gptoss.py --workdir=runs/dafnybench_react_gptoss

Needs Dafny 4 (third_party/README.md); --config.data.dafny_legacy=True uses Debian's Dafny 2.3.

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the ReAct vs ReAct+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("dafnybench", "react", "gptoss")
