r"""Reflexion ± CounterMem on SWE-bench Verified (decision unit: edit / patch), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch swebench          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/swebench_reflexion_gptoss.py --workdir=runs/swebench_reflexion_gptoss
    python -m countermem_jax.train_selector --config=configs/swebench_reflexion_gptoss.py --workdir=runs/swebench_reflexion_gptoss
    python -m countermem_jax.evaluate       --config=configs/swebench_reflexion_gptoss.py --workdir=runs/swebench_reflexion_gptoss

Needs one prepared checkout per instance: --config.data.swebench_checkouts=DIR.

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the Reflexion vs Reflexion+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("swebench", "reflexion", "gptoss")
