r"""ReAct ± CounterMem on SATLIB solving strategies (uf/uuf/flat), gpt-oss-120b served by vLLM.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/satlib_react_gptoss.py --workdir=runs/satlib_react_gptoss
    python -m countermem_jax.train_selector --config=configs/satlib_react_gptoss.py --workdir=runs/satlib_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/satlib_react_gptoss.py --workdir=runs/satlib_react_gptoss

Paper settings (Appendix B.4, C.2): B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4
(seed 0 online, 1-4 retrained offline from its logged transitions). Prints ReAct vs
ReAct+CounterMem with scores, tokens, calls and failures per solved task, coverage, harmful
use and rescued/broken counts.
"""
from countermem_jax.config_defaults import gptoss_config


def get_config():
    c = gptoss_config("satlib", "react")
    c.splits.update(n_build=100, n_train=200, n_validation=20, n_eval=100)
    return c
