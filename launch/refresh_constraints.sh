#!/usr/bin/env bash
# Refreshes launch/constraints.txt, the pinned versions that install.sh and CI use, to the newest
# releases setup.py allows, then installs them in a new virtual environment and runs the README's
# test command there. Review the diff of constraints.txt and commit it only when the suite passes.
#
#   bash launch/refresh_constraints.sh               # newest versions, then the whole suite
#   bash launch/refresh_constraints.sh --keep-pins   # after editing setup.py: resolve only what is new
#   bash launch/refresh_constraints.sh --no-test     # regenerate the file, run nothing
#
# Needs uv (pip install uv). The lock is resolved for CPython 3.11 on Linux, the Python CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
upgrade=(--upgrade)
run_tests=1
for arg in "$@"; do
  case "$arg" in
    --keep-pins) upgrade=() ;;
    --no-test) run_tests=0 ;;
    *) echo "refresh_constraints.sh: unknown option $arg (--keep-pins, --no-test)"; exit 2 ;;
  esac
done
find_links=()
[ -d ../shared/wheels ] && find_links=(--find-links ../shared/wheels)
uv pip compile setup.py "${upgrade[@]}" --python-version 3.11 --no-emit-find-links \
  --extra test --extra solvers --extra llm --extra cpu --extra plots --extra sweep --extra curves \
  "${find_links[@]}" --custom-compile-command "bash launch/refresh_constraints.sh" \
  -o launch/constraints.txt
[ "$run_tests" -eq 1 ] || exit 0
venv="$(mktemp -d)/venv"
python3 -m venv "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
bash launch/install.sh
python -m pytest -q tests
