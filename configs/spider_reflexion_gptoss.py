r"""Reflexion ± CounterMem on Spider dev, gpt-oss-120b served by vLLM.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/spider_reflexion_gptoss.py --workdir=runs/spider_reflexion_gptoss
    python -m countermem_jax.train_selector --config=configs/spider_reflexion_gptoss.py --workdir=runs/spider_reflexion_gptoss
    python -m countermem_jax.evaluate       --config=configs/spider_reflexion_gptoss.py --workdir=runs/spider_reflexion_gptoss

Paper settings (Appendix B.4, C.2): B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4
(seed 0 online, 1-4 retrained offline from its logged transitions). Prints Reflexion vs
Reflexion+CounterMem with scores, tokens, calls and failures per solved task, coverage, harmful
use and rescued/broken counts.
"""
from countermem_jax.config_defaults import gptoss_config


def get_config():
    c = gptoss_config("spider", "reflexion")
    c.splits.update(n_build=60, n_train=200, n_validation=20, n_eval=40)
    return c
