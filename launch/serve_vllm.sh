#!/usr/bin/env bash
# Serves openai/gpt-oss-120b with vLLM on a GPU host (needs the `serve` extra: pip install -e ".[serve]").
#
#   launch/serve_vllm.sh [--tp 2] [--replicas 4] [--port 8000] [--gpu-mem 0.90] [--max-len 32768]
#                        [--max-seqs 256] [--model openai/gpt-oss-120b] [--urls-file urls.txt]
#
# With --replicas R, starts R servers, replica i on GPUs [i*tp, (i+1)*tp) and port PORT+i, waits
# until each answers /health, and writes their base URLs (one per line) to --urls-file, which a
# config can use as backbone.base_urls. Logs go to vllm_<port>.log. Ctrl-C stops them all.
set -euo pipefail
TP=1; REPLICAS=1; PORT=8000; GPU_MEM=0.90; MAX_LEN=32768; MAX_SEQS=256
MODEL="openai/gpt-oss-120b"; URLS_FILE="vllm_urls.txt"; HEALTH_TIMEOUT=1800
while [ $# -gt 0 ]; do
  case "$1" in
    --tp) TP="$2"; shift 2;;
    --replicas) REPLICAS="$2"; shift 2;;
    --port) PORT="$2"; shift 2;;
    --gpu-mem) GPU_MEM="$2"; shift 2;;
    --max-len) MAX_LEN="$2"; shift 2;;
    --max-seqs) MAX_SEQS="$2"; shift 2;;
    --model) MODEL="$2"; shift 2;;
    --urls-file) URLS_FILE="$2"; shift 2;;
    --health-timeout) HEALTH_TIMEOUT="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v vllm >/dev/null || { echo "vllm not found: pip install -e '.[serve]' on the GPU host" >&2; exit 1; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM
: > "$URLS_FILE"
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i))
  gpus=$(seq -s, $((i * TP)) $((i * TP + TP - 1)))
  CUDA_VISIBLE_DEVICES="$gpus" vllm serve "$MODEL" --host 0.0.0.0 --port "$port" \
    --tensor-parallel-size "$TP" --gpu-memory-utilization "$GPU_MEM" \
    --max-model-len "$MAX_LEN" --max-num-seqs "$MAX_SEQS" > "vllm_${port}.log" 2>&1 &
  pids+=($!)
  echo "replica $i: GPUs $gpus, port $port (log vllm_${port}.log)"
done
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i)); waited=0
  until curl -sf "http://127.0.0.1:${port}/health" >/dev/null; do
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "replica on port $port exited; see vllm_${port}.log" >&2; exit 1; }
    sleep 5; waited=$((waited + 5))
    [ "$waited" -lt "$HEALTH_TIMEOUT" ] || { echo "replica on port $port not healthy after ${HEALTH_TIMEOUT}s" >&2; exit 1; }
  done
  echo "http://$(hostname -f 2>/dev/null || hostname):${port}/v1" >> "$URLS_FILE"
done
echo "all $REPLICAS replicas healthy; base URLs in $URLS_FILE"
wait
