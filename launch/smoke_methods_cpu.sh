#!/usr/bin/env bash
# Smoke run of every method (countermem_jax.baselines.METHODS) through the three phase
# binaries on Spider with the CPU model (Qwen2.5-Coder-0.5B, llama.cpp in-process), on 3
# construction and 3 evaluation questions (CounterMem also 2 selector-training questions and 1
# validation question, with a 6-decision selector schedule). Not a measurement: a check that
# every phase of every method completes and that every LLM call is logged.
#
#   bash launch/smoke_methods_cpu.sh [WORKROOT] [METHOD,METHOD,...]   (default runs/smoke_methods)
#
# One workdir per method under WORKROOT (a method switch on one workdir is refused by design),
# one shared LLM response cache (WORKROOT/llm_cache: the base agent's drafts are computed once).
# Each phase's output is in WORKROOT/<method>/<phase>.out. Ends with one line per method (base
# vs method score, the method's evaluation tokens and LLM calls, the task-run vs ledger check)
# and a last line `result: {json}`; exits non-zero if a phase failed or a call went unlogged.
# About 20-40 minutes on 2 cores. Rerunning resumes: finished phases are skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
WORKROOT="${1:-runs/smoke_methods}"
CONFIG=configs/spider_react_cpu.py
export JAX_PLATFORMS=cpu
KNOWN="$(python -c 'from countermem_jax import baselines; print(",".join(baselines.METHODS))')"
METHODS="${2:-$KNOWN}"
for method in ${METHODS//,/ }; do
  case ",$KNOWN," in *",$method,"*) ;; *) echo "unknown method '$method'; expected some of $KNOWN"; exit 2;; esac
done
mkdir -p "$WORKROOT"
MANIFEST="$WORKROOT/splits_manifest.json"
python launch/smoke_methods.py manifest "$MANIFEST" --config="$CONFIG" || exit 1
# Mechanism replies (ReasoningBank extraction, ExpeL insights, ...) need more than the CPU
# config's 160 tokens; the selector schedule is cut to fit two training questions.
COMMON=(--config.splits.manifest="$MANIFEST" --config.backbone.cache_dir="$WORKROOT/llm_cache"
        --config.agent.max_tokens=384
        --config.selector.total_decisions=6 --config.selector.learning_starts=2
        --config.selector.train_every=1 --config.selector.target_sync_every=3
        --config.selector.checkpoint_every=3 --config.selector.batch_size=2)
failed=()
start=$(date +%s)
for method in ${METHODS//,/ }; do
  wd="$WORKROOT/$method"
  mkdir -p "$wd"
  for phase in build_memory train_selector evaluate; do
    t0=$(date +%s)
    if ! python -m "countermem_jax.$phase" --config="$CONFIG" --workdir="$wd" \
        --config.method="$method" "${COMMON[@]}" >"$wd/$phase.out" 2>&1 \
        || grep -q "^Traceback" "$wd/$phase.out"; then
      echo "[$method] $phase FAILED after $(( $(date +%s) - t0 )) s; last lines of $wd/$phase.out:"
      tail -n 15 "$wd/$phase.out"
      failed+=("$method/$phase")
      break
    fi
    echo "[$method] $phase done in $(( $(date +%s) - t0 )) s: $(grep -v '%|' "$wd/$phase.out" | grep -v '^\s*$' | tail -n 1)"
  done
done
echo "all methods in $(( $(date +%s) - start )) s; failed phases: ${failed[*]:-none}"
python launch/smoke_methods.py summary "$WORKROOT" --methods="$METHODS"
rc=$?
[ ${#failed[@]} -eq 0 ] && exit $rc || exit 1
