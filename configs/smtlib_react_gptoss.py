r"""ReAct ± CounterMem on SMT-LIB solver actions (QF_LIA / QF_LRA / QF_BV), gpt-oss-120b served by vLLM.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/smtlib_react_gptoss.py --workdir=runs/smtlib_react_gptoss
    python -m countermem_jax.train_selector --config=configs/smtlib_react_gptoss.py --workdir=runs/smtlib_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/smtlib_react_gptoss.py --workdir=runs/smtlib_react_gptoss

Paper settings (Appendix B.4, C.2): B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4
(seed 0 online, 1-4 retrained offline from its logged transitions). Prints ReAct vs
ReAct+CounterMem with scores, tokens, calls and failures per solved task, coverage, harmful
use and rescued/broken counts.
"""
from countermem_jax.config_defaults import gptoss_config


def get_config():
    c = gptoss_config("smtlib", "react")
    c.splits.update(n_build=12, n_train=12, n_validation=4, n_eval=12)
    return c
