r"""ReAct ± CounterMem on BIRD (decision unit: schema / join), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch bird          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/bird_react_gptoss.py --workdir=runs/bird_react_gptoss
    python -m countermem_jax.train_selector --config=configs/bird_react_gptoss.py --workdir=runs/bird_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/bird_react_gptoss.py --workdir=runs/bird_react_gptoss

Needs the BIRD dev databases: --config.data.bird_db_root=/path/to/dev_databases.

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the ReAct vs ReAct+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("bird", "react", "gptoss")
