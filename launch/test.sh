#!/usr/bin/env bash
# The test suite, what CI runs, in the environment launch/setup.sh made: the active virtual
# environment, else ./.venv. Arguments go to pytest (e.g. -x, -k NAME, tests/test_readme.py).
#
#   bash launch/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  if [ ! -f .venv/bin/activate ]; then
    echo "error: no .venv here and no virtual environment active; set up with: bash launch/setup.sh"
    exit 1
  fi
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
exec python -m pytest -q tests "$@"
