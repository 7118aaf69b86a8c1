#!/usr/bin/env bash
# Serves openai/gpt-oss-120b with vLLM on a GPU host, from the vLLM environment that
# launch/install_gpu_host.sh makes (docs/gpu_host.md).
#
#   launch/serve_vllm.sh [--tp T] [--replicas R] [--port 8000] [--gpu-mem 0.90] [--max-len 32768]
#                        [--max-seqs 256] [--model openai/gpt-oss-120b] [--served-name NAME]
#                        [--host 127.0.0.1] [--api-key-env VAR] [--urls-file vllm_urls.txt]
#                        [--health-timeout 1800] [--stagger 15] [--internal-port-base 30000]
#                        [--watch-interval 5] [--no-download] [--no-flag-check]
#   launch/serve_vllm.sh --check-flags     # only: does the installed vLLM take our flags?
#   launch/serve_vllm.sh --list-flags      # only: the flags passed to every `vllm serve`
#
# 0. Asks the installed vLLM (`vllm serve --help=all`) whether it takes every flag below, and
#    names a refused one before anything is downloaded or a GPU is touched.
# 1. Fetches once, into the Hugging Face cache, only the files vLLM loads: the repository's
#    top-level safetensors, config and tokenizer files, not original/ (the reference checkpoint)
#    or metal/ (about 65 GB of 196 GB for gpt-oss-120b; it says the size and the free disk
#    first, and stops when the disk cannot hold them). launch/fetch_weights.py does it with
#    huggingface_hub.snapshot_download (what `hf download` calls) and says in one line whether a
#    failure was a name or revision the hub does not have (404), a login or permission problem,
#    the network or the disk. The replicas then load from the cache with HF_HUB_OFFLINE=1, never
#    race one download, and the health timeout measures start-up only. --no-download (or a
#    local model directory) skips this.
# 2. Splits the visible GPUs (CUDA_VISIBLE_DEVICES, else nvidia-smi) into R replicas of T GPUs.
#    T defaults to 1 on one GPU or where each GPU has >= 120 GB (an H200: the ~65 GB of weights
#    leave room for the KV cache), to 2 for a 120b model on smaller GPUs (8 H100s: 4 x TP 2), else
#    1; R defaults to the visible GPUs / T. Replica i gets the i-th group of GPUs, port PORT+i
#    (refused at once if taken) and its own block of 100 ports from INTERNAL_PORT_BASE + 100 i
#    for vLLM's internal use (VLLM_PORT: the distributed-init port that two replicas started at
#    once can otherwise both pick, vLLM #39015/#43206); its log is vllm_<port>.log. Replicas
#    start --stagger seconds apart.
# 3. Each replica serves the model under --served-name (default: the model id, or
#    openai/gpt-oss-120b for a local directory: the name the gpt-oss configs send), with
#    --enable-prompt-tokens-details (cached prompt tokens in the usage, which the ledger
#    records) and the gpt-oss recipe's flag for Hopper GPUs (--async-scheduling). It binds
#    127.0.0.1 unless --host says otherwise; another address needs --api-key-env VAR (the key is
#    read from $VAR and passed as --api-key; clients export the same variable).
# 4. Waits until every replica answers /health (curl --max-time 10, on the address it listens
#    on), then writes the URL file in one step: one line per replica,
#    "<base URL> max_num_seqs=<M>" (what the replica batches at once), the file a config reads
#    as backbone.base_urls (or COUNTERMEM_LLM_URLS). The client keeps at most the sum of
#    max_num_seqs in flight (countermem_jax/backbones/served_urls.py).
# 5. Then watches the replicas: one that exits has its URL removed from the file at once, its
#    log's tail printed, the others stopped, and the script ends with status 1, so systemd's
#    Restart=on-failure restarts the set and a tmux pane shows why.
# Ctrl-C stops them all.
set -euo pipefail
TP=""; REPLICAS=""; PORT=8000; GPU_MEM=0.90; MAX_LEN=32768; MAX_SEQS=256; DOWNLOAD=1
MODEL="openai/gpt-oss-120b"; SERVED=""; HOST="127.0.0.1"; KEY_ENV=""; URLS_FILE="vllm_urls.txt"
HEALTH_TIMEOUT=1800; STAGGER=15; INTERNAL_BASE=30000; WATCH=5; FLAG_CHECK=1; ONLY=""
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
    --stagger) STAGGER="$2"; shift 2;;
    --internal-port-base) INTERNAL_BASE="$2"; shift 2;;
    --watch-interval) WATCH="$2"; shift 2;;
    --no-download) DOWNLOAD=0; shift;;
    --no-flag-check) FLAG_CHECK=0; shift;;
    --check-flags|--list-flags) ONLY="${1#--}"; shift;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
here="$(cd "$(dirname "$0")" && pwd)"
# every flag each `vllm serve` below gets (--api-key only with --api-key-env)
SERVE_FLAGS=(--served-model-name --host --port --tensor-parallel-size --gpu-memory-utilization
             --max-model-len --max-num-seqs --enable-prompt-tokens-details --async-scheduling)
[ -n "$KEY_ENV" ] && SERVE_FLAGS+=(--api-key)
if [ "$ONLY" = list-flags ]; then printf '%s\n' "${SERVE_FLAGS[@]}"; exit 0; fi
command -v vllm >/dev/null || {
  echo "vllm not found: activate the vLLM environment (launch/install_gpu_host.sh makes it)" >&2; exit 1; }

# --- 0. the installed vLLM takes every flag we pass (its help lists them; no GPU is touched)
check_flags() {
  local help missing=() f
  help="$(vllm serve --help=all 2>&1)" || {
    echo "\`vllm serve --help=all\` failed: $(tail -n 1 <<< "$help")" >&2; return 1; }
  for f in "${SERVE_FLAGS[@]}"; do
    grep -qE -- "(^|[[:space:],[])${f}([][[:space:],=]|$)" <<< "$help" || missing+=("$f")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "this vLLM ($(vllm --version 2>/dev/null | tail -n 1 || echo '?')) does not take ${missing[*]}: install a vLLM in the range launch/install_gpu_host.sh pins" >&2
    return 1
  fi
}
if [ "$ONLY" = check-flags ]; then
  check_flags && echo "vllm serve takes all ${#SERVE_FLAGS[@]} flags: ${SERVE_FLAGS[*]}"; exit $?
fi
[ "$FLAG_CHECK" = 0 ] || check_flags || exit 1

case "$HOST" in
  127.*|localhost) ;;
  *) [ -n "$KEY_ENV" ] && [ -n "${!KEY_ENV:-}" ] || {
       echo "--host $HOST is reachable from other machines: give --api-key-env VAR with the key in \$VAR" >&2; exit 2; };;
esac
# where /health is polled and what the URL file names: the address the replicas listen on
case "$HOST" in
  localhost) poll_host=127.0.0.1; url_host=127.0.0.1;;
  127.*) poll_host="$HOST"; url_host="$HOST";;
  0.0.0.0|::|"[::]") poll_host=127.0.0.1; url_host="$(hostname -f 2>/dev/null || hostname)";;
  *) poll_host="$HOST"; url_host="$HOST";;
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
  if (exec 3<>"/dev/tcp/${poll_host}/${port}") 2>/dev/null; then
    echo "port ${port} is already in use (another server?): stop it or give --port" >&2; exit 1
  fi
done

# --- the weights, once: what vLLM loads, not original/ or metal/
if [ "$DOWNLOAD" = 1 ] && [ ! -d "$MODEL" ]; then
  py="$(dirname "$(command -v vllm)")/python"   # the vLLM environment's, with huggingface_hub
  [ -x "$py" ] || py=python3
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
  echo "fetching the weights once: ${MODEL} without original/* and metal/* (launch/fetch_weights.py)"
  # progress on stderr; a failure ends in one line "download of MODEL failed: <why>"
  "$py" "$here/fetch_weights.py" "$MODEL" --exclude "original/*" --exclude "metal/*" >/dev/null || exit 1
  export HF_HUB_OFFLINE=1   # the replicas read the cache; none of them goes to the hub again
fi

# --- the replicas
rm -f "$URLS_FILE"   # a config never reads the URLs of servers that are gone
key_args=()
[ -n "$KEY_ENV" ] && key_args=(--api-key "${!KEY_ENV:?--api-key-env names $KEY_ENV, which is not set}")
pids=(); urls=(); groups=()
stop_all() { kill "${pids[@]}" 2>/dev/null || true; }
trap 'stop_all' EXIT
trap 'stop_all; rm -f "$URLS_FILE"; exit 130' INT TERM
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i))
  group=$(IFS=,; echo "${gpus[*]:$((i * TP)):$TP}")
  [ "$i" -eq 0 ] || sleep "$STAGGER"
  CUDA_VISIBLE_DEVICES="$group" VLLM_PORT=$((INTERNAL_BASE + 100 * i)) \
    vllm serve "$MODEL" --served-model-name "$SERVED" \
    --host "$HOST" --port "$port" --tensor-parallel-size "$TP" \
    --gpu-memory-utilization "$GPU_MEM" --max-model-len "$MAX_LEN" --max-num-seqs "$MAX_SEQS" \
    --enable-prompt-tokens-details --async-scheduling "${key_args[@]}" > "vllm_${port}.log" 2>&1 &
  pids+=($!); urls+=("http://${url_host}:${port}/v1"); groups+=("$group")
  echo "replica $i: GPUs $group, port $port, internal ports from $((INTERNAL_BASE + 100 * i)) (log vllm_${port}.log)"
done
exited() {   # replica $1 is gone: say so with its log's tail, its URL out of the file, stop
  local i="$1" status=0 port=$((PORT + $1))
  wait "${pids[$i]}" 2>/dev/null || status=$?
  if [ -f "$URLS_FILE" ]; then   # the others stay listed until they are stopped below
    grep -vF "${urls[$i]} " "$URLS_FILE" > "${URLS_FILE}.tmp" || true
    mv "${URLS_FILE}.tmp" "$URLS_FILE"
  fi
  echo "replica $i (${urls[$i]}, GPUs ${groups[$i]}) exited with status $status; the end of vllm_${port}.log:" >&2
  tail -n 20 "vllm_${port}.log" >&2 || true
  if [ -f "$URLS_FILE" ]; then echo "stopping the other replicas; their URLs leave $URLS_FILE" >&2
  else echo "stopping the other replicas" >&2; fi
  stop_all; rm -f "$URLS_FILE"; exit 1
}
lines=()
for ((i = 0; i < REPLICAS; i++)); do
  port=$((PORT + i)); start=$SECONDS
  until curl -sf --max-time 10 "http://${poll_host}:${port}/health" >/dev/null; do
    for ((j = 0; j < REPLICAS; j++)); do kill -0 "${pids[$j]}" 2>/dev/null || exited "$j"; done
    [ $((SECONDS - start)) -lt "$HEALTH_TIMEOUT" ] || {
      echo "replica $i on port $port not healthy after ${HEALTH_TIMEOUT}s; see vllm_${port}.log" >&2; exit 1; }
    sleep 1
  done
  lines+=("${urls[$i]} max_num_seqs=${MAX_SEQS}")
done
printf '%s\n' "${lines[@]}" > "${URLS_FILE}.tmp" && mv "${URLS_FILE}.tmp" "$URLS_FILE"
echo "all $REPLICAS replicas healthy ($((REPLICAS * MAX_SEQS)) sequences at once); base URLs in $URLS_FILE"
# --- 5. keep watching: a replica that exits ends the script (status 1), so it is seen
while :; do
  sleep "$WATCH"
  for ((i = 0; i < REPLICAS; i++)); do kill -0 "${pids[$i]}" 2>/dev/null || exited "$i"; done
done
