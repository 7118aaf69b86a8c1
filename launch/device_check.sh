#!/usr/bin/env bash
# The JAX side on a GPU, measured once (docs/speed.md "GPU"): selector training on the GPU
# against the CPU, five seeds vmapped against one, retrieval at 100,000 records, and the
# platform and memory settings the binaries make (benchmarks/speed/device_check.py).
#
#   launch/device_check.sh [--small] [--out FILE] [device_check flags]
#
# Needs only JAX with a CUDA jaxlib, flax, optax, orbax, chex, absl and this checkout: no vLLM,
# no network, no data. Under 8 minutes on one H200 (it stops itself at 7.5); --small runs it at a
# tiny size on any machine (tests/test_device_check.py does, on the CPU). The last line is
# `result: {json}`; --out FILE keeps the whole output.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=""; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2;;
    *) args+=("$1"); shift;;
  esac
done
py="${PYTHON:-python3}"
"$py" -c 'import jax, flax, optax, orbax.checkpoint, chex, absl' 2>/dev/null || {
  echo "$py lacks one of jax, flax, optax, orbax-checkpoint, chex, absl: install them (pip install -e '.[gpu]')" >&2; exit 1; }
run=(timeout 450 env PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$py" -m benchmarks.speed.device_check "${args[@]}")
if [ -n "$OUT" ]; then "${run[@]}" 2>&1 | tee "$OUT"; else "${run[@]}"; fi
