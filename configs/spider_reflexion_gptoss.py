r"""Reflexion ± CounterMem on Spider (decision unit: join / predicate), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch spider          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/spider_reflexion_gptoss.py --workdir=runs/spider_reflexion_gptoss
    python -m countermem_jax.train_selector --config=configs/spider_reflexion_gptoss.py --workdir=runs/spider_reflexion_gptoss
    python -m countermem_jax.evaluate       --config=configs/spider_reflexion_gptoss.py --workdir=runs/spider_reflexion_gptoss

Runs wherever the Spider data is present.

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the Reflexion vs Reflexion+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("spider", "reflexion", "gptoss")
