r"""Reflexion ± CounterMem on SAT Competition / SATLIB (decision unit: branching / encoding), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch satlib          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/satlib_reflexion_gptoss.py --workdir=runs/satlib_reflexion_gptoss
    python -m countermem_jax.train_selector --config=configs/satlib_reflexion_gptoss.py --workdir=runs/satlib_reflexion_gptoss
    python -m countermem_jax.evaluate       --config=configs/satlib_reflexion_gptoss.py --workdir=runs/satlib_reflexion_gptoss

Calibrated (README "Headroom"): the uf50 / uuf50 / flat30 families with 45 conflicts per solve,
under which a default solver decides 42-54%; --config.data.sat_families="()"
--config.data.max_conflicts=200000 is the smoke-test setting (610/610).

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the Reflexion vs Reflexion+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("satlib", "reflexion", "gptoss")
