#!/usr/bin/env bash
# Serves the CPU model through llama.cpp's OpenAI-compatible server on 127.0.0.1.
#
#   launch/serve_cpu.sh [--port 8080] [--model /path/to/model.gguf] [--ctx 4096] [--threads N]
#
# Without --model it uses the pinned Qwen2.5-Coder-0.5B-Instruct GGUF (joined and verified once
# from its PyPI chunk packages). Point a config at http://127.0.0.1:PORT/v1 with backbone.kind=openai.
set -euo pipefail
PORT=8080; MODEL=""; CTX=4096; THREADS=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT="$2"; shift 2;;
    --model) MODEL="$2"; shift 2;;
    --ctx) CTX="$2"; shift 2;;
    --threads) THREADS="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
if [ -z "$MODEL" ]; then
  MODEL=$(python -c "from countermem_jax.backbones import gguf; print(gguf.default_model_path())")
fi
exec python -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT" \
  --n_ctx "$CTX" --n_threads "$THREADS"
