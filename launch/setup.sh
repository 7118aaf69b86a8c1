#!/usr/bin/env bash
# Sets up a CPU machine for the quickstart and the tests: a virtual environment (./.venv, made if
# missing, unless one is active), the system packages, the package with its CPU extras and the CPU
# model (launch/install.sh; skipped when this environment already holds the same pins).
#
#   bash launch/setup.sh             # install system packages if possible, else say how
#   bash launch/setup.sh --require   # CI: fail if the system packages cannot be installed
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "error: python3 >= 3.10 is needed to make .venv (found: $(python3 --version 2>&1 || echo none))"
    exit 1
  fi
  [ -f .venv/bin/activate ] || python3 -m venv .venv
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
bash launch/system_packages.sh "$@"
bash launch/install.sh
