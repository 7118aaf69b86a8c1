r"""ReAct ± CounterMem on SMT-LIB / SMT-COMP (decision unit: encoding / solver action), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch smtlib          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/smtlib_react_gptoss.py --workdir=runs/smtlib_react_gptoss
    python -m countermem_jax.train_selector --config=configs/smtlib_react_gptoss.py --workdir=runs/smtlib_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/smtlib_react_gptoss.py --workdir=runs/smtlib_react_gptoss

Calibrated (README "Headroom"): every solver call is capped at smt_max_rlimit = 2,000 units of
deterministic work, under which the default action solves 19/36; --config.data.smt_max_rlimit=0 is
the smoke-test setting (36/36).

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the ReAct vs ReAct+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("smtlib", "react", "gptoss")
