r"""Reflexion ± CounterMem on BIRD (decision unit: schema / join), a hosted OpenAI-compatible API model (default: Gemini 3.1 Flash-Lite, the paper's second backbone).

    python -m countermem_jax.data fetch bird          # once; prints what to set
    export GEMINI_API_KEY=...        # the key is read from this variable, never from a file
    # another provider: --config.backbone.base_urls=https://api.openai.com/v1 \
    #   --config.backbone.model=<model id> --config.backbone.api_key_env=OPENAI_API_KEY
    python -m countermem_jax.build_memory   --config=configs/bird_reflexion_api.py --workdir=runs/bird_reflexion_api
    python -m countermem_jax.train_selector --config=configs/bird_reflexion_api.py --workdir=runs/bird_reflexion_api
    python -m countermem_jax.evaluate       --config=configs/bird_reflexion_api.py --workdir=runs/bird_reflexion_api

Needs the BIRD dev databases: --config.data.bird_db_root=/path/to/dev_databases.

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the Reflexion vs Reflexion+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("bird", "reflexion", "api")
