#!/usr/bin/env bash
# Starts one Ray node for sweeps (python -m countermem_jax.sweep) on a GPU host, together with the
# host's own vLLM replicas (launch/serve_vllm.sh), and advertises the host's LLM slots.
#
#   launch/ray_cluster.sh head   [--port 6379] [node options] [serve_vllm.sh options]
#   launch/ray_cluster.sh worker --address HEAD_HOST:6379 [node options] [serve_vllm.sh options]
#
# node options: --num-cpus N (CPUs for checkers; default: all), --node-ip-address IP,
#               --slots N (default: the sum of max_num_seqs in the URL file, else replicas x
#               max-seqs), --urls FILE_OR_URLS with --no-serve (use servers that already run
#               instead of starting serve_vllm.sh)
# serve_vllm.sh options (passed through): --tp, --replicas, --port-base (its --port), --max-seqs,
#               --gpu-mem, --max-len, --model, --served-name, --host, --api-key-env,
#               --health-timeout, --stagger, --internal-port-base
#
# What it does: (1) starts serve_vllm.sh in the background (unless --no-serve) and waits until
# every replica is healthy and listed in the URL file; (2) exports COUNTERMEM_LLM_URLS=<URL file>,
# which every Ray worker of this node inherits: the sweep's runs on this node talk to this node's
# replicas only (countermem_jax/sweep/execute.py); (3) `ray start --block` with the custom resource
# llm_slots = replicas x max-num-seqs (what the replicas serve at once, as the URL file says),
# which the sweep's runs on this host's servers reserve as their concurrency, so the requests in
# flight never exceed what vLLM batches; runs on a hosted API reserve none and need their key
# (e.g. GEMINI_API_KEY) exported before this script runs: Ray workers inherit this environment.
# The soft open-file limit is raised to the hard one first (the workers inherit it too).
# Ctrl-C (or the end of `ray start --block`) stops the replicas too.
set -euo pipefail
ROLE="${1:-}"; shift || true
[ "$ROLE" = head ] || [ "$ROLE" = worker ] || {
  echo "usage: launch/ray_cluster.sh head|worker [options] (see the header of this script)" >&2; exit 2; }
RAY_PORT=6379; ADDRESS=""; NUM_CPUS=""; NODE_IP=""; SLOTS=""; URLS=""; SERVE=1
REPLICAS=""; MAX_SEQS=256; URLS_FILE="$PWD/vllm_urls.txt"; serve_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) RAY_PORT="$2"; shift 2;;
    --address) ADDRESS="$2"; shift 2;;
    --num-cpus) NUM_CPUS="$2"; shift 2;;
    --node-ip-address) NODE_IP="$2"; shift 2;;
    --slots) SLOTS="$2"; shift 2;;
    --urls) URLS="$2"; shift 2;;
    --no-serve) SERVE=0; shift;;
    --urls-file) URLS_FILE="$2"; shift 2;;
    --replicas) REPLICAS="$2"; serve_args+=("$1" "$2"); shift 2;;
    --max-seqs) MAX_SEQS="$2"; serve_args+=("$1" "$2"); shift 2;;
    --port-base) serve_args+=(--port "$2"); shift 2;;
    --tp|--gpu-mem|--max-len|--model|--served-name|--host|--api-key-env|--health-timeout|--stagger|--internal-port-base)
      serve_args+=("$1" "$2"); shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
[ "$ROLE" = head ] || [ -n "$ADDRESS" ] || { echo "worker: give --address HEAD_HOST:PORT" >&2; exit 2; }
command -v ray >/dev/null || { echo "ray not found: pip install -e '.[sweep]'" >&2; exit 1; }
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true   # 1,024 requests in flight need more than 1,024 files
serve_pid=""
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true' EXIT INT TERM
if [ "$SERVE" = 1 ]; then
  rm -f "$URLS_FILE"
  bash "$(dirname "$0")/serve_vllm.sh" "${serve_args[@]}" --urls-file "$URLS_FILE" &
  serve_pid=$!
  # serve_vllm.sh writes the file in one step once every replica (its count derived from the
  # GPUs unless --replicas) is healthy
  until [ -s "$URLS_FILE" ]; do
    kill -0 "$serve_pid" 2>/dev/null || { echo "serve_vllm.sh exited; see vllm_*.log" >&2; exit 1; }
    sleep 5
  done
  REPLICAS="$(grep -c . "$URLS_FILE")"
  URLS="$URLS_FILE"
fi
[ -n "$URLS" ] || { echo "--no-serve needs --urls FILE_OR_URLS" >&2; exit 2; }
if [ -z "$REPLICAS" ]; then  # --no-serve: one replica per URL given
  if [ -f "$URLS" ]; then REPLICAS="$(grep -c . "$URLS")"; else REPLICAS="$(tr ',' '\n' <<< "$URLS" | grep -c .)"; fi
fi
if [ -z "$SLOTS" ] && [ -f "$URLS" ]; then   # what the replicas hold, as serve_vllm.sh wrote it
  SLOTS="$(awk '{for (i = 2; i <= NF; i++) if ($i ~ /^max_num_seqs=/) {split($i, f, "="); s += f[2]}}
                END {if (s > 0) print s}' "$URLS")"
fi
SLOTS="${SLOTS:-$((REPLICAS * MAX_SEQS))}"
export COUNTERMEM_LLM_URLS="$URLS"
# the runs' JAX stays off the GPUs vLLM holds and never preallocates (countermem_jax/runtime/jax_platform.py)
export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}" XLA_PYTHON_CLIENT_PREALLOCATE=false
args=(start --block --resources "{\"llm_slots\": ${SLOTS}}")
[ -n "$NUM_CPUS" ] && args+=(--num-cpus "$NUM_CPUS")
[ -n "$NODE_IP" ] && args+=(--node-ip-address "$NODE_IP")
if [ "$ROLE" = head ]; then args+=(--head --port "$RAY_PORT"); else args+=(--address "$ADDRESS"); fi
echo "ray node ($ROLE): llm_slots=${SLOTS}, COUNTERMEM_LLM_URLS=${URLS}"
ray "${args[@]}"
