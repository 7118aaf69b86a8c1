r"""ReAct ± CounterMem on miniF2F in Lean 4 (needs lake + Mathlib: third_party/README.md), gpt-oss-120b served by vLLM.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/minif2f_react_gptoss.py --workdir=runs/minif2f_react_gptoss
    python -m countermem_jax.train_selector --config=configs/minif2f_react_gptoss.py --workdir=runs/minif2f_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/minif2f_react_gptoss.py --workdir=runs/minif2f_react_gptoss

Paper settings (Appendix B.4, C.2): B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4
(seed 0 online, 1-4 retrained offline from its logged transitions). Prints ReAct vs
ReAct+CounterMem with scores, tokens, calls and failures per solved task, coverage, harmful
use and rescued/broken counts.
"""
from countermem_jax.config_defaults import gptoss_config


def get_config():
    c = gptoss_config("minif2f", "react")
    c.data.update(lean_split='test', lean_project='')
    c.splits.update(n_build=80, n_train=80, n_validation=10, n_eval=60)
    return c
