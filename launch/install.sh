#!/usr/bin/env bash
# Installs CounterMem-JAX with the extras used on CPU machines and in CI.
# The llama.cpp wheel is taken from ../shared/wheels when present (skips a 6-10 minute build).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --upgrade pip
python -m pip install -q -e ".[test,solvers,llm]"
