r"""ReAct ± CounterMem on ProofNet (decision unit: proof continuation), a hosted OpenAI-compatible API model (default: Gemini 3.1 Flash-Lite, the paper's second backbone).

    python -m countermem_jax.data fetch proofnet          # once; prints what to set
    export GEMINI_API_KEY=...        # the key is read from this variable, never from a file
    # another provider: --config.backbone.base_urls=https://api.openai.com/v1 \
    #   --config.backbone.model=<model id> --config.backbone.api_key_env=OPENAI_API_KEY
    python -m countermem_jax.build_memory   --config=configs/proofnet_react_api.py --workdir=runs/proofnet_react_api
    python -m countermem_jax.train_selector --config=configs/proofnet_react_api.py --workdir=runs/proofnet_react_api
    python -m countermem_jax.evaluate       --config=configs/proofnet_react_api.py --workdir=runs/proofnet_react_api

Needs Lean 4 + Mathlib (third_party/README.md) to check proofs.

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4). `evaluate` prints
the ReAct vs ReAct+CounterMem table (README "Running experiments"); not run here yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("proofnet", "react", "api")
