#!/usr/bin/env bash
# Serves the CPU model through llama.cpp's OpenAI-compatible server on 127.0.0.1.
#
#   launch/serve_cpu.sh [--port 8080] [--model /path/to/model.gguf] [--ctx 4096] [--threads N]
#                       [--served-name NAME] [--urls-file FILE] [--health-timeout 300]
#
# Without --model it uses the pinned Qwen2.5-Coder-0.5B-Instruct GGUF (joined and verified once
# from its PyPI chunk packages). Point a config at http://127.0.0.1:PORT/v1 with backbone.kind=openai.
# --served-name NAME serves it under NAME (llama.cpp's model alias; /v1/models lists it), e.g.
# openai/gpt-oss-120b, the name the gpt-oss configs send. --urls-file FILE waits until the server
# answers /v1/models (llama.cpp's server has no /health), then writes FILE in one step in the
# format launch/serve_vllm.sh writes, "<base URL> max_num_seqs=1" (llama_cpp.server decodes one
# request at a time), and removes it when the server stops. launch/rehearse_gpu_host.sh uses it
# in vLLM's place.
set -euo pipefail
PORT=8080; MODEL=""; CTX=4096; THREADS=$(nproc); SERVED=""; URLS_FILE=""; HEALTH_TIMEOUT=300
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT="$2"; shift 2;;
    --model) MODEL="$2"; shift 2;;
    --ctx) CTX="$2"; shift 2;;
    --threads) THREADS="$2"; shift 2;;
    --served-name) SERVED="$2"; shift 2;;
    --urls-file) URLS_FILE="$2"; shift 2;;
    --health-timeout) HEALTH_TIMEOUT="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
if [ -z "$MODEL" ]; then
  MODEL=$(python -c "from countermem_jax.backbones import gguf; print(gguf.default_model_path())")
fi
alias_args=()
[ -n "$SERVED" ] && alias_args=(--model_alias "$SERVED")
server=(python -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT"
        --n_ctx "$CTX" --n_threads "$THREADS" "${alias_args[@]}")
[ -n "$URLS_FILE" ] || exec "${server[@]}"

if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
  echo "port ${PORT} is already in use (another server?): stop it or give --port" >&2; exit 1
fi
"${server[@]}" &
pid=$!
url="http://127.0.0.1:${PORT}/v1"
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
         grep -qsF "$url " "$URLS_FILE" && rm -f "$URLS_FILE"; true; }
trap 'stop; exit 143' TERM
trap 'stop; exit 130' INT
start=$SECONDS
until curl -sf --max-time 10 "${url}/models" >/dev/null; do
  kill -0 "$pid" 2>/dev/null || { wait "$pid" || status=$?
    echo "llama.cpp server on port ${PORT} exited with status ${status:-0} before answering" >&2; exit 1; }
  [ $((SECONDS - start)) -lt "$HEALTH_TIMEOUT" ] || {
    echo "llama.cpp server on port ${PORT} not answering after ${HEALTH_TIMEOUT}s" >&2; stop; exit 1; }
  sleep 0.5
done
printf '%s max_num_seqs=1\n' "$url" > "${URLS_FILE}.tmp" && mv "${URLS_FILE}.tmp" "$URLS_FILE"
echo "serving ${MODEL##*/} as ${SERVED:-its file name} at ${url} (context ${CTX}); URL in ${URLS_FILE}"
status=0; wait "$pid" || status=$?
grep -qsF "$url " "$URLS_FILE" && rm -f "$URLS_FILE"
echo "llama.cpp server on port ${PORT} exited with status ${status}" >&2
exit "$status"
