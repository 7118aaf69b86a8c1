#!/usr/bin/env bash
# The GPU host recipe (docs/gpu_host.md) end to end on a CPU machine: a real server process in
# vLLM's place, only the GPU missing.
#
#   bash launch/rehearse_gpu_host.sh [--small] [WORKDIR]      (default runs/rehearsal; emptied)
#
# 1. serve: launch/serve_cpu.sh (llama.cpp's OpenAI-compatible server, the pinned
#    Qwen2.5-Coder-0.5B GGUF) under the served name openai/gpt-oss-120b, writing WORKDIR/
#    vllm_urls.txt in serve_vllm.sh's format; a loopback OpenAI-compatible server stands in for a
#    hosted API (countermem_jax/testing/openai_server.py) and refuses one template's constraint.
# 2. preflight: python -m countermem_jax.preflight on the served setting.
# 3. sweep: configs/rehearsal/spider.py's Spider setting (configs/paper.py:spider,react,gptoss and
#    spider,react,api with a few tasks, decisions and tokens): the dry run, then --local, which
#    builds, trains and evaluates the served cell and the hosted-style cell.
#    During it: once a phase of the served cell has started and sent KILL_AFTER requests, the
#    replica is killed (SIGKILL) and a new one started on another port (serve_cpu.sh rewrites the URL file; the client re-reads it);
#    the long schema's prompts exceed the replica's context (--ctx), each one a failed request
#    (context_length) while the phase goes on; llama.cpp's server refuses the JSON-schema
#    constraint (HTTP 500, a validation error), handled per template.
# 4. summary: what each step showed, from the workdirs' logs (launch/rehearsal.py);
#    exit status 1 when a step did not show what it should.
# Needs the cpu and server extras (llama-cpp-python[server]), the model and the Spider data.
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL=0; WORK=runs/rehearsal
while [ $# -gt 0 ]; do
  case "$1" in
    --small) SMALL=1; shift;;
    -*) echo "unknown option $1" >&2; exit 2;;
    *) WORK="$1"; shift;;
  esac
done
if [ "$SMALL" = 1 ]; then VARIANT=",small"; KILL_AFTER=2; DURATION=3; else VARIANT=""; KILL_AFTER=6; DURATION=10; fi
CTX=${REHEARSAL_CTX:-768}   # the short schemas' prompts fit, the long one's do not
# --small (the test) decodes on one thread: on a shared 2-core machine two llama.cpp threads
# wait on each other whenever one is descheduled (a --small run: 366 s with 2, 151 s with 1)
[ "$SMALL" = 1 ] && THREADS=${REHEARSAL_THREADS:-1} || THREADS=${REHEARSAL_THREADS:-$(nproc)}
DATA="$(python -c "from countermem_jax.runtime.paths import data_root; print(data_root())")"
[ -f "$DATA/spider/dev.json" ] || { echo "rehearsal: no Spider data at $DATA/spider (docs/data.md)" >&2; exit 1; }
python -c "import llama_cpp.server" 2>/dev/null || {
  echo "rehearsal: llama_cpp.server not importable: pip install 'llama-cpp-python[server]' (the cpu extra)" >&2; exit 1; }
python -c "from countermem_jax.backbones import gguf; gguf.default_model_path()" || exit 1
export JAX_PLATFORMS=cpu REHEARSAL_API_KEY=rehearsal-key
rm -rf "$WORK"; mkdir -p "$WORK"; WORK="$(cd "$WORK" && pwd)"
URLS="$WORK/vllm_urls.txt"
export COUNTERMEM_LLM_URLS="$URLS"   # the sweep's urls_env: the served cells' URL file
started=$(date +%s)
say() { echo "== $*"; }
free_port() { python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start_replica() {   # $1 port, $2 log name: serve_cpu.sh in the background, until the URL file names it
  bash launch/serve_cpu.sh --port "$1" --ctx "$CTX" --threads "$THREADS" \
    --served-name openai/gpt-oss-120b --urls-file "$URLS" > "$WORK/$2.log" 2>&1 &
  pids+=($!); replica_pid=$!
  local t=0
  until grep -qsF "http://127.0.0.1:$1/v1 " "$URLS"; do
    kill -0 "$replica_pid" 2>/dev/null || { echo "rehearsal: replica on port $1 did not start:" >&2; tail -n 5 "$WORK/$2.log" >&2; exit 1; }
    t=$((t + 1)); [ "$t" -lt 600 ] || { echo "rehearsal: replica on port $1 not up after 300 s" >&2; exit 1; }
    sleep 0.5
  done
}
answered() { local n; n=$(grep -cE '"POST /v1/chat/completions HTTP/1.1" [0-9]{3}' "$WORK/$1.log" 2>/dev/null); echo "${n:-0}"; }

current_phase() {   # the served cell's phase in progress, from its log.jsonl
  local log
  log=$(ls -t "$WORK"/sweep/spider/react_gptoss/*/log.jsonl 2>/dev/null | head -n 1 || true)
  [ -n "$log" ] || { echo "?"; return; }
  python - "$log" <<'PY' 2>/dev/null || echo '?'
import json, sys
phase = "?"
for line in open(sys.argv[1]):
    try:
        event = json.loads(line)
    except ValueError:
        continue
    if event.get("event") == "phase_start":
        phase = event.get("phase")
    elif event.get("event") == "phase_end":
        phase = "?"
print(phase)
PY
}

say "1. serve (load average $(cut -d' ' -f1-3 /proc/loadavg))"
PORT_A=$(free_port); start_replica "$PORT_A" replica_a
echo "replica A: $(grep -m1 '^serving' "$WORK/replica_a.log")"
echo "URL file $URLS: $(cat "$URLS")"
echo "/v1/models: $(curl -s --max-time 10 "http://127.0.0.1:$PORT_A/v1/models" | python -c 'import json,sys; print([m["id"] for m in json.load(sys.stdin)["data"]])')"
# the stand-in answers as the pipeline benchmark's scripted SQL model (benchmarks/scripted_sql.py):
# every question of the two databases' gold query, a deterministic mistake on about half
python - "$WORK/api_model.json" <<'PY'
import json, sys
from countermem_jax import domains
from benchmarks import scripted_sql
import importlib.util
spec = importlib.util.spec_from_file_location("rehearsal_spider", "configs/rehearsal/spider.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
cfg = module.get_config("api").data
tasks = domains.load_benchmark(cfg)[0]
json.dump(scripted_sql.responder_config(tasks), open(sys.argv[1], "w"))
PY
python -m countermem_jax.testing.openai_server --gpt_oss_style --model_id gemini-3.1-flash-lite \
  --responder benchmarks.scripted_sql:make_responder --responder_config "$WORK/api_model.json" \
  --refuse_constraint_names distilled_record > "$WORK/api.url" 2> "$WORK/api.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$WORK/api.url" ] && break; sleep 0.2; done
export COUNTERMEM_REHEARSAL_API_URL="$(head -n 1 "$WORK/api.url")"
echo "hosted-API stand-in: $COUNTERMEM_REHEARSAL_API_URL (refuses the constraint distilled_record)"

say "2. preflight (configs/rehearsal/spider.py:gptoss$VARIANT, ${DURATION} s of throughput)"
pf=0
timeout 600 python -m countermem_jax.preflight --config="configs/rehearsal/spider.py:gptoss$VARIANT" \
  --config.backbone.base_urls="$URLS" --duration_s="$DURATION" > "$WORK/preflight.txt" 2> "$WORK/preflight.err" || pf=$?
cat "$WORK/preflight.txt"; echo "preflight exit status $pf"

say "3. sweep: the dry run"
SWEEP=(--sweep=configs/sweeps/rehearsal.py --sweep.root="$WORK/sweep"
       --sweep.run_config="configs/rehearsal/spider.py:{backbone}$VARIANT")
tps=$(grep -o -- '--tokens_per_s=[0-9.]*' "$WORK/preflight.txt" | head -n 1 || true)
python -m countermem_jax.sweep "${SWEEP[@]}" --dry_run $tps 2>&1 | tee "$WORK/dry_run.txt" | tail -n 12

say "3. sweep --local, the replica killed mid-phase after $KILL_AFTER requests and restarted on another port"
sw=0
python -m countermem_jax.sweep "${SWEEP[@]}" --local > "$WORK/sweep.txt" 2>&1 &
sweep_pid=$!; pids+=($sweep_pid)
before=$(answered replica_a)   # the preflight's
# mid-phase: a phase of the served cell has started and not ended, KILL_AFTER requests sent
phase="?"
while kill -0 "$sweep_pid" 2>/dev/null; do
  if [ $(( $(answered replica_a) - before )) -ge "$KILL_AFTER" ]; then
    phase=$(current_phase); [ "$phase" = "?" ] || break
  fi
  sleep 1
done
if kill -0 "$sweep_pid" 2>/dev/null; then
  server_pid=$(pgrep -P "$replica_pid" -f llama_cpp.server | head -n 1 || true)
  [ -n "$server_pid" ] || { echo "rehearsal: replica A's server process not found" >&2; exit 1; }
  kill -9 "$server_pid"; echo "$phase" > "$WORK/killed_during"
  echo "killed replica A (pid $server_pid, port $PORT_A) after $(( $(answered replica_a) - before )) of the sweep's requests, during the phase ${phase}"
  for _ in $(seq 20); do grep -qsF ":$PORT_A/" "$URLS" || break; sleep 0.5; done
  echo "URL file after the kill: $(cat "$URLS" 2>/dev/null || echo '(removed by serve_cpu.sh)')"
  PORT_B=$(free_port); start_replica "$PORT_B" replica_b
  echo "replica B up on port $PORT_B; URL file: $(cat "$URLS")"
else
  echo "the sweep ended before a phase of the served cell had sent $KILL_AFTER requests"
fi
wait "$sweep_pid" || sw=$?
grep -E "^(error|sweep|.*(done|failed|running).*)" "$WORK/sweep.txt" | tail -n 6 || true
echo "sweep exit status $sw"
echo "replica A answered $(answered replica_a) requests, replica B $(answered replica_b)"

say "4. summary (wall time $(( $(date +%s) - started )) s, load average $(cut -d' ' -f1-3 /proc/loadavg))"
python launch/rehearsal.py "$WORK" --preflight_status "$pf" --sweep_status "$sw"
