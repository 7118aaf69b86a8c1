#!/usr/bin/env bash
# The CPU quickstart: set up (launch/setup.sh: .venv, system packages, the package, the CPU model;
# Spider when it is missing and can be fetched), then build memory, train the selector and
# evaluate ReAct with and without CounterMem on held-out Spider questions with the local
# Qwen2.5-Coder-0.5B model.
#
#   bash launch/quickstart_cpu.sh [WORKDIR]      (default runs/spider_cpu)
#
# Resumable: run it again after an interruption and finished tasks are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKDIR="${1:-runs/spider_cpu}"
CONFIG=configs/spider_react_cpu.py
bash launch/setup.sh
if [ -z "${VIRTUAL_ENV:-}" ]; then
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
# The data folder the loaders read (countermem_jax/runtime/paths.py): $COUNTERMEM_DATA or ../shared/benchdata.
DATA="${COUNTERMEM_DATA:-$(cd .. && pwd)/shared/benchdata}"
if [ ! -f "$DATA/spider/dev.json" ] || [ ! -d "$DATA/spider/database" ]; then
  echo "No Spider data at $DATA/spider: fetching it (a pinned GitHub archive; recorded sha256s are verified)"
  if ! python -m countermem_jax.data fetch spider --root "$DATA"; then
    echo "Spider could not be fetched. Get it (where GitHub is reachable) with:"
    echo "    python -m countermem_jax.data fetch spider --root $DATA"
    echo "then run this script again (with COUNTERMEM_DATA=$DATA if you chose another folder)."
    exit 1
  fi
fi
export JAX_PLATFORMS=cpu
start=$(date +%s)
python -m countermem_jax.build_memory --config="$CONFIG" --workdir="$WORKDIR"
python -m countermem_jax.inspect_store --store="$WORKDIR/store_frozen.jsonl" --top=3
python -m countermem_jax.train_selector --config="$CONFIG" --workdir="$WORKDIR"
python -m countermem_jax.evaluate --config="$CONFIG" --workdir="$WORKDIR"
# one evaluation task where a record changed the draft (rescued or broken), or why the store is empty
python -m countermem_jax.inspect_store --workdir="$WORKDIR"
# the time with the load it ran under (1, 5, 15 min load averages): a shared machine runs slower
echo "quickstart finished in $(( $(date +%s) - start )) s (after set-up; load average" \
     "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)); workdir $WORKDIR"
