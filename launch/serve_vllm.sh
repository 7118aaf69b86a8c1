#!/usr/bin/env bash
# Serves openai/gpt-oss-120b with vLLM on a GPU host, from the vLLM environment that
# launch/install_gpu_host.sh makes (docs/gpu_host.md).
#
#   launch/serve_vllm.sh [--tp T] [--replicas R] [--port 8000] [--gpu-mem 0.90] [--max-len 32768]
#                        [--max-seqs 256] [--model openai/gpt-oss-120b] [--served-name NAME]
#                        [--host 127.0.0.1] [--api-key-env VAR] [--urls-file vllm_urls.txt]
#                        [--health-timeout 1800] [--no-download]
#
# 1. Fetches once, into the Hugging Face cache, only the files vLLM loads: the repository's
#    top-level safetensors, config and tokenizer files, not original/ (the reference checkpoint)
#    or metal/ (about 65 GB of 196 GB for gpt-oss-120b; it says the size and the free disk
#    first, and stops when the disk cannot hold them). The replicas then load from the cache with HF_HUB_OFFLINE=1, never race one
#    download, and the health timeout measures start-up only. --no-download (or a local model
#    directory) skips this.
# 2. Splits the visible GPUs (CUDA_VISIBLE_DEVICES, else nvidia-smi) into R replicas of T GPUs.
#    T defaults to 1 on one GPU or where each GPU has >= 120 GB (an H200: the ~65 GB of weights
#    leave room for the KV cache), to 2 for a 120b model on smaller GPUs (8 H100s: 4 x TP 2), else
#    1; R defaults to the visible GPUs / T. Replica i gets the i-th group of GPUs and port
#    PORT+i (refused at once if taken); its log is vllm_<port>.log.
# 3. Each replica serves the model under --served-name (default: the model id, or
#    openai/gpt-oss-120b for a local directory: the name the gpt-oss configs send), with
#    --enable-prompt-tokens-details (cached prompt tokens in the usage, which the ledger
#    records) and the gpt-oss recipe's flag for Hopper GPUs (--async-scheduling). It binds
#    127.0.0.1 unless --host says otherwise; another address needs --api-key-env VAR (the key is
#    read from $VAR and passed as --api-key; clients export the same variable).
# 4. Waits until every replica answers /health, then writes the URL file in one step: one line
#    per replica, "<base URL> max_num_seqs=<M>" (what the replica batches at once), the file a
#    config reads as backbone.base_urls (or COUNTERMEM_LLM_URLS). The client keeps at most the
#    sum of max_num_seqs in flight (countermem_jax/backbones/served_urls.py).
# Ctrl-C stops them all.
set -euo pipefail
TP=""; REPLICAS=""; PORT=8000; GPU_MEM=0.90; MAX_LEN=32768; MAX_SEQS=256; DOWNLOAD=1
MODEL="openai/gpt-oss-120b"; SERVED=""; HOST="127.0.0.1"; KEY_ENV=""; URLS_FILE="vllm_urls.txt"
HEALTH_TIMEOUT=1800
while [ $# -gt 0 ]; do
  case "$1" in
    --tp) TP="$2"; shift 2;;
    --replicas) REPLICAS="$2"; shift 2;;
    --port) PORT="$2"; shift 2;;
    --gpu-mem) GPU_MEM="$2"; shift 2;;
    --max-len) MAX_LEN="$2"; shift 2;;
    --max-seqs) MAX_SEQS="$2"; shift 2;;
    --model) MODEL="$2"; shift 2;;
    --served-name) SERVED="$2"; shift 2;;
    --host) HOST="$2"; shift 2;;
    --api-key-env) KEY_ENV="$2"; shift 2;;
    --urls-file) URLS_FILE="$2"; shift 2;;
    --health-timeout) HEALTH_TIMEOUT="$2"; shift 2;;
    --no-download) DOWNLOAD=0; shift;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
command -v vllm >/dev/null || {
  echo "vllm not found: activate the vLLM environment (launch/install_gpu_host.sh makes it)" >&2; exit 1; }
case "$HOST" in
  127.*|localhost) ;;
  *) [ -n "$KEY_ENV" ] && [ -n "${!KEY_ENV:-}" ] || {
       echo "--host $HOST is reachable from other machines: give --api-key-env VAR with the key in \$VAR" >&2; exit 2; };;
esac
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true   # a replica holds a socket per request in flight
if [ -z "$SERVED" ]; then
  if [ -d "$MODEL" ]; then SERVED="openai/gpt-oss-120b"; else SERVED="$MODEL"; fi
fi

# --- the visible GPUs, their memory, and the replicas x TP layout
mapfile -t smi < <(command -v nvidia-smi >/dev/null && \
  nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits | tr -d ' ' || true)
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a gpus <<< "$CUDA_VISIBLE_DEVICES"
else
  gpus=(); for row in "${smi[@]}"; do gpus+=("${row%%,*}"); done
fi
min_mib=""   # the smallest memory among the visible GPUs nvidia-smi lists
for row in "${smi[@]}"; do
  for g in "${gpus[@]}"; do
    if [ "${row%%,*}" = "$g" ]; then
      mib="${row##*,}"; { [ -z "$min_mib" ] || [ "$mib" -lt "$min_mib" ]; } && min_mib="$mib"
    fi
  done
done
if [ -z "$TP" ]; then
  TP=1
  case "$MODEL" in
    *120b*|*120B*)
      # 120 GB = 114,441 MiB: one such GPU holds the weights and a large KV cache
      if [ "${#gpus[@]}" -gt 1 ] && [ "${min_mib:-0}" -lt 114441 ]; then TP=2; fi;;
  esac
fi
if [ "${#gpus[@]}" -eq 0 ]; then
  [ -n "$REPLICAS" ] || { echo "no GPU visible (CUDA_VISIBLE_DEVICES unset, no nvidia-smi): give --replicas and --tp" >&2; exit 1; }
  mapfile -t gpus < <(seq 0 $((REPLICAS * TP - 1)))
fi
REPLICAS="${REPLICAS:-$(( ${#gpus[@]} / TP ))}"
if [ "$REPLICAS" -lt 1 ] || [ $((REPLICAS * TP)) -gt "${#gpus[@]}" ]; then
  echo "${REPLICAS} replicas x TP ${TP} need $((REPLICAS * TP)) GPUs; ${#gpus[@]} visible (${gpus[*]})" >&2; exit 1
fi
echo "GPUs visible: ${#gpus[@]} (${gpus[*]}, ${min_mib:-?} MiB each at least); serving ${MODEL} as ${SERVED}: ${REPLICAS} replicas x TP ${TP}, max ${MAX_SEQS} sequences each"

# --- the ports, before anything is downloaded or started
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i))
  if (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
    echo "port ${port} is already in use (another server?): stop it or give --port" >&2; exit 1
  fi
done

# --- the weights, once: what vLLM loads, not original/ or metal/
if [ "$DOWNLOAD" = 1 ] && [ ! -d "$MODEL" ]; then
  if command -v hf >/dev/null; then fetch=(hf download "$MODEL")
  elif command -v huggingface-cli >/dev/null; then fetch=(huggingface-cli download "$MODEL")
  else echo "neither hf nor huggingface-cli found (huggingface_hub comes with vllm)" >&2; exit 1; fi
  fetch+=(--exclude "original/*" "metal/*")
  case "$MODEL" in *gpt-oss-120b*) need_gb=66;; *gpt-oss-20b*) need_gb=14;; *) need_gb="";; esac
  cache="${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"
  mkdir -p "$cache"
  free_gb=$(( $(df -Pk "$cache" | awk 'NR==2 {print $4}') / 1000000 ))
  have_gb=$(( $(du -sk "$cache/models--${MODEL//\//--}" 2>/dev/null | cut -f1 || echo 0) / 1000000 ))
  if [ -n "$need_gb" ]; then
    echo "the weights need about ${need_gb} GB in ${cache} (${free_gb} GB free, ${have_gb} GB already there)"
    if [ $((free_gb + have_gb)) -lt "$need_gb" ]; then
      echo "not enough disk for the weights: free $((need_gb - have_gb - free_gb)) GB more in ${cache}, or point HF_HOME elsewhere" >&2; exit 1
    fi
  fi
  echo "fetching the weights once: ${fetch[*]}"
  "${fetch[@]}" || { echo "download of $MODEL failed (log in to Hugging Face? disk space: ${free_gb} GB free in ${cache}?)" >&2; exit 1; }
  export HF_HUB_OFFLINE=1   # the replicas read the cache; none of them goes to the hub again
fi

# --- the replicas
rm -f "$URLS_FILE"   # a config never reads the URLs of servers that are gone
key_args=()
[ -n "$KEY_ENV" ] && key_args=(--api-key "${!KEY_ENV:?--api-key-env names $KEY_ENV, which is not set}")
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i))
  group=$(IFS=,; echo "${gpus[*]:$((i * TP)):$TP}")
  CUDA_VISIBLE_DEVICES="$group" vllm serve "$MODEL" --served-model-name "$SERVED" \
    --host "$HOST" --port "$port" --tensor-parallel-size "$TP" \
    --gpu-memory-utilization "$GPU_MEM" --max-model-len "$MAX_LEN" --max-num-seqs "$MAX_SEQS" \
    --enable-prompt-tokens-details --async-scheduling "${key_args[@]}" > "vllm_${port}.log" 2>&1 &
  pids+=($!)
  echo "replica $i: GPUs $group, port $port (log vllm_${port}.log)"
done
if [ "$HOST" = "127.0.0.1" ] || [ "$HOST" = localhost ]; then url_host=127.0.0.1
else url_host="$(hostname -f 2>/dev/null || hostname)"; fi
lines=()
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i)); waited=0
  until curl -sf "http://127.0.0.1:${port}/health" >/dev/null; do
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "replica on port $port exited; see vllm_${port}.log" >&2; tail -n 5 "vllm_${port}.log" >&2 || true; exit 1; }
    sleep 1; waited=$((waited + 1))
    [ "$waited" -lt "$HEALTH_TIMEOUT" ] || { echo "replica on port $port not healthy after ${HEALTH_TIMEOUT}s; see vllm_${port}.log" >&2; exit 1; }
  done
  lines+=("http://${url_host}:${port}/v1 max_num_seqs=${MAX_SEQS}")
done
printf '%s\n' "${lines[@]}" > "${URLS_FILE}.tmp" && mv "${URLS_FILE}.tmp" "$URLS_FILE"
echo "all $REPLICAS replicas healthy ($((REPLICAS * MAX_SEQS)) sequences at once); base URLs in $URLS_FILE"
wait
