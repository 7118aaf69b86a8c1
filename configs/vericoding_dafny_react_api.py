r"""ReAct ± CounterMem on Vericoding-Dafny (decision unit: code step), a hosted OpenAI-compatible API model (default: Gemini 3.1 Flash-Lite, the paper's second backbone).

    python -m countermem_jax.data fetch vericoding          # once; prints what to set
    export GEMINI_API_KEY=...        # the key is read from this variable, never from a file
    # another provider: --config.backbone.base_urls=https://api.openai.com/v1 \
    #   --config.backbone.model=<model id> --config.backbone.api_key_env=OPENAI_API_KEY
    python -m countermem_jax.build_memory   --config=configs/vericoding_dafny_react_api.py --workdir=runs/vericoding_dafny_react_api
    python -m countermem_jax.train_selector --config=configs/vericoding_dafny_react_api.py --workdir=runs/vericoding_dafny_react_api
    python -m countermem_jax.evaluate       --config=configs/vericoding_dafny_react_api.py --workdir=runs/vericoding_dafny_react_api

Needs Dafny 4 (third_party/README.md).

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the ReAct vs ReAct+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("vericoding_dafny", "react", "api")
