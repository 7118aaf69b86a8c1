#!/usr/bin/env bash
# The system packages the tests and the repository-test sandbox need: bubblewrap (the sandbox),
# Debian's python3-pytest and python3-pytest-timeout (the interpreter inside the sandbox) and dafny
# (the Dafny adapter's test). Installed with apt-get when running as root; otherwise one line says
# what to run, and the tests that need them skip with a reason.
#
#   bash launch/system_packages.sh             # quickstart: install if possible, else say how
#   bash launch/system_packages.sh --require   # CI: fail if they cannot be installed
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v dafny >/dev/null 2>&1 || need+=(dafny)
/usr/bin/python3 -c "import pytest, pytest_timeout" >/dev/null 2>&1 || \
  need+=(python3-pytest python3-pytest-timeout)
[ "${#need[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
  exit 0
fi
echo "System packages missing (their tests will skip): sudo apt-get install -y ${need[*]}"
[ "${1:-}" = "--require" ] && exit 1
exit 0
