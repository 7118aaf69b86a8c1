#!/usr/bin/env bash
# Serves openai/gpt-oss-120b with vLLM on a GPU host (needs the `serve` extra: pip install -e ".[serve]").
#
#   launch/serve_vllm.sh [--tp T] [--replicas R] [--port 8000] [--gpu-mem 0.90] [--max-len 32768]
#                        [--max-seqs 256] [--model openai/gpt-oss-120b] [--urls-file vllm_urls.txt]
#                        [--health-timeout 1800] [--no-download]
#
# 1. Fetches the weights once (`hf download`, or `huggingface-cli download` from older
#    huggingface_hub releases) into the Hugging Face cache, before any replica starts: replicas then
#    load from the cache with HF_HUB_OFFLINE=1, never race one download, and the health timeout
#    measures start-up only. --no-download (or a local model directory) skips this.
# 2. Splits the visible GPUs (CUDA_VISIBLE_DEVICES, else nvidia-smi) into R replicas of T GPUs:
#    T defaults to 2 for a 120b model (room for the KV cache of many requests in flight beside ~65 GB
#    of weights on an 80 GB GPU), else 1; R defaults to the visible GPUs / T (8 H100s: 4 x TP 2).
#    Replica i gets the i-th group of GPUs and port PORT+i; its log is vllm_<port>.log.
# 3. Waits until every replica answers /health, then writes their base URLs (one per line) to
#    --urls-file in one step, the file a config reads as backbone.base_urls (or COUNTERMEM_LLM_URLS).
# Ctrl-C stops them all.
set -euo pipefail
TP=""; REPLICAS=""; PORT=8000; GPU_MEM=0.90; MAX_LEN=32768; MAX_SEQS=256; DOWNLOAD=1
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
    --no-download) DOWNLOAD=0; shift;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v vllm >/dev/null || { echo "vllm not found: pip install -e '.[serve]' on the GPU host" >&2; exit 1; }

# --- the visible GPUs and the replicas x TP layout
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a gpus <<< "$CUDA_VISIBLE_DEVICES"
elif command -v nvidia-smi >/dev/null; then
  mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader | tr -d ' ')
else
  gpus=()
fi
if [ -z "$TP" ]; then
  case "$MODEL" in *120b*|*120B*) TP=2;; *) TP=1;; esac
fi
if [ "${#gpus[@]}" -eq 0 ]; then
  [ -n "$REPLICAS" ] || { echo "no GPU visible (CUDA_VISIBLE_DEVICES unset, no nvidia-smi): give --replicas and --tp" >&2; exit 1; }
  mapfile -t gpus < <(seq 0 $((REPLICAS * TP - 1)))
fi
REPLICAS="${REPLICAS:-$(( ${#gpus[@]} / TP ))}"
if [ "$REPLICAS" -lt 1 ] || [ $((REPLICAS * TP)) -gt "${#gpus[@]}" ]; then
  echo "${REPLICAS} replicas x TP ${TP} need $((REPLICAS * TP)) GPUs; ${#gpus[@]} visible (${gpus[*]})" >&2; exit 1
fi
echo "GPUs visible: ${#gpus[@]} (${gpus[*]}); serving ${MODEL} as ${REPLICAS} replicas x TP ${TP}"

# --- the weights, once
if [ "$DOWNLOAD" = 1 ] && [ ! -d "$MODEL" ]; then
  if command -v hf >/dev/null; then fetch=(hf download "$MODEL")
  elif command -v huggingface-cli >/dev/null; then fetch=(huggingface-cli download "$MODEL")
  else echo "neither hf nor huggingface-cli found (huggingface_hub comes with vllm)" >&2; exit 1; fi
  echo "fetching the weights once: ${fetch[*]}"
  "${fetch[@]}" || { echo "download of $MODEL failed (log in to Hugging Face? disk space?)" >&2; exit 1; }
  export HF_HUB_OFFLINE=1   # the replicas read the cache; none of them goes to the hub again
fi

# --- the replicas
rm -f "$URLS_FILE"   # a config never reads the URLs of servers that are gone
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i))
  group=$(IFS=,; echo "${gpus[*]:$((i * TP)):$TP}")
  CUDA_VISIBLE_DEVICES="$group" vllm serve "$MODEL" --host 0.0.0.0 --port "$port" \
    --tensor-parallel-size "$TP" --gpu-memory-utilization "$GPU_MEM" \
    --max-model-len "$MAX_LEN" --max-num-seqs "$MAX_SEQS" > "vllm_${port}.log" 2>&1 &
  pids+=($!)
  echo "replica $i: GPUs $group, port $port (log vllm_${port}.log)"
done
urls=()
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i)); waited=0
  until curl -sf "http://127.0.0.1:${port}/health" >/dev/null; do
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "replica on port $port exited; see vllm_${port}.log" >&2; exit 1; }
    sleep 5; waited=$((waited + 5))
    [ "$waited" -lt "$HEALTH_TIMEOUT" ] || { echo "replica on port $port not healthy after ${HEALTH_TIMEOUT}s; see vllm_${port}.log" >&2; exit 1; }
  done
  urls+=("http://$(hostname -f 2>/dev/null || hostname):${port}/v1")
done
printf '%s\n' "${urls[@]}" > "${URLS_FILE}.tmp" && mv "${URLS_FILE}.tmp" "$URLS_FILE"
echo "all $REPLICAS replicas healthy; base URLs in $URLS_FILE"
wait
