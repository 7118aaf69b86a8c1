r"""ReAct ± CounterMem on SAT Competition / SATLIB (decision unit: branching / encoding), a hosted OpenAI-compatible API model (default: Gemini 3.1 Flash-Lite, the paper's second backbone).

    python -m countermem_jax.data fetch satlib          # once; prints what to set
    export GEMINI_API_KEY=...        # the key is read from this variable, never from a file
    # another provider: --config.backbone.base_urls=https://api.openai.com/v1 \
    #   --config.backbone.model=<model id> --config.backbone.api_key_env=OPENAI_API_KEY
    python -m countermem_jax.build_memory   --config=configs/satlib_react_api.py --workdir=runs/satlib_react_api
    python -m countermem_jax.train_selector --config=configs/satlib_react_api.py --workdir=runs/satlib_react_api
    python -m countermem_jax.evaluate       --config=configs/satlib_react_api.py --workdir=runs/satlib_react_api

Calibrated (README "Headroom"): the uf50 / uuf50 / flat30 families with 45 conflicts per solve,
under which a default solver decides 42-54%; --config.data.sat_families="()"
--config.data.max_conflicts=200000 is the smoke-test setting (610/610).

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the ReAct vs ReAct+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("satlib", "react", "api")
