#!/usr/bin/env bash
# Makes the two Python environments of a GPU host (docs/gpu_host.md), then prints the next command.
#
#   launch/install_gpu_host.sh [--vllm-env DIR] [--project-env DIR] [--python python3] [--dry-run]
#                              [--no-fix-check] [--cu129-version V] [--check-only]
#
#   vLLM environment    (default ../venv-vllm): vLLM alone, as vLLM asks (its own torch and CUDA
#                       libraries), built for the CUDA the driver supports (below). The
#                       installed vLLM must also carry the gpt-oss fixes for JSON-constrained
#                       replies (check_vllm reads its code; --no-fix-check skips that) and take
#                       every flag launch/serve_vllm.sh passes (its `vllm serve --help=all`).
#   project environment (default ../venv-countermem): this package with the `gpu` extra (CUDA
#                       jaxlib for --jax_gpu) and the sweep, plots and LLM-client extras: no vLLM
#                       (the `serve` extra is never installed beside jax[cuda12]).
#
# Checks, in this order, each refused in one line before anything is installed:
#   1. the Python: `venv` with ensurepip (Debian/Ubuntu: python3-venv), its headers (Python.h:
#      python3-dev; vLLM's Triton kernels compile against them at start, vLLM #27890) and a C
#      compiler (build-essential);
#   2. the driver: the CUDA version nvidia-smi reports (its banner's "CUDA Version", or "CUDA UMD
#      Version" on R610+ drivers; else derived from --query-gpu=driver_version). vLLM's default
#      (PyPI) wheels are built for CUDA 13.0 since 0.20 and need a 580+ driver; its CUDA 12.9
#      wheels (https://wheels.vllm.ai/<version>/cu129) run on 575-579; older drivers are refused.
# --dry-run prints every command and runs none (the checks still run). --check-only runs the
# checks and the installed vLLM's checks on an existing --vllm-env and installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_MIN=0.19.0      # the gpt-oss reasoning parser that no longer lets a reply escape its JSON
                     # constraint (vLLM PR #28000, merged 2025-11; present in the v0.19.0 source)
VLLM_CEILING=0.34    # exclusive: up to the current release line (0.33.x); raise it after a
                     # preflight GO on a newer one
CU129_VERSION=0.33.0 # the release taken from vLLM's CUDA 12.9 index (pip needs one version there)
VLLM_ENV=../venv-vllm; PROJECT_ENV=../venv-countermem; PYTHON=python3; DRY=0; FIX_CHECK=1
CHECK_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --vllm-env) VLLM_ENV="$2"; shift 2;;
    --project-env) PROJECT_ENV="$2"; shift 2;;
    --python) PYTHON="$2"; shift 2;;
    --dry-run) DRY=1; shift;;
    --no-fix-check) FIX_CHECK=0; shift;;
    --cu129-version) CU129_VERSION="$2"; shift 2;;
    --check-only) CHECK_ONLY=1; shift;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
[ "$VLLM_ENV" != "$PROJECT_ENV" ] || { echo "--vllm-env and --project-env must differ" >&2; exit 2; }

# --- 1. the Python: venv, headers, a compiler
command -v "$PYTHON" >/dev/null || { echo "$PYTHON not found: install Python 3.10+ or give --python" >&2; exit 1; }
read -r has_venv include has_header < <("$PYTHON" -c '
import importlib.util, os, sysconfig
inc = sysconfig.get_paths()["include"]
print(int(importlib.util.find_spec("venv") is not None and importlib.util.find_spec("ensurepip") is not None),
      inc, int(os.path.isfile(os.path.join(inc, "Python.h"))))') || {
  echo "$PYTHON does not run: install Python 3.10+ or give --python" >&2; exit 1; }
pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$has_venv" = 1 ] || {
  echo "$PYTHON cannot make virtual environments (no venv/ensurepip): install python${pyver}-venv (Debian/Ubuntu: apt install python3-venv)" >&2; exit 1; }
[ "$has_header" = 1 ] || {
  echo "Python.h is missing from ${include}: install python${pyver}-dev (apt install python3-dev); vLLM compiles kernels against it at start" >&2; exit 1; }
command -v cc >/dev/null || command -v gcc >/dev/null || {
  echo "no C compiler (cc or gcc): install one (apt install build-essential); vLLM's Triton kernels need it at start" >&2; exit 1; }

# --- 2. the driver and the vLLM build it can run
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: install the NVIDIA driver first" >&2; exit 1; }
cuda="$(nvidia-smi | sed -n 's/.*CUDA \(UMD \)\{0,1\}Version: *\([0-9][0-9.]*\).*/\2/p' | head -n 1)"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | sed -n 1p | tr -d ' ')"
if [ -z "$cuda" ]; then   # no banner version (e.g. "Not Found" in a VM): from the driver branch
  case "${driver%%.*}" in
    ''|*[!0-9]*) cuda="";;
    *) if [ "${driver%%.*}" -ge 580 ]; then cuda=13.0
       elif [ "${driver%%.*}" -ge 575 ]; then cuda=12.9
       elif [ "${driver%%.*}" -ge 570 ]; then cuda=12.8
       else cuda=12.0; fi;;
  esac
fi
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }   # $1 >= $2
if [ -n "$cuda" ] && at_least "$cuda" 13.0; then
  variant=cu130
  vllm_pip=("vllm>=${VLLM_MIN},<${VLLM_CEILING}" --extra-index-url https://download.pytorch.org/whl/cu130)
elif [ -n "$cuda" ] && at_least "$cuda" 12.9; then
  variant=cu129
  vllm_pip=("vllm==${CU129_VERSION}+cu129" --extra-index-url "https://wheels.vllm.ai/${CU129_VERSION}/cu129"
            --extra-index-url https://download.pytorch.org/whl/cu129)
else
  echo "the NVIDIA driver (${driver:-?}) supports CUDA ${cuda:-?}; vLLM's wheels need CUDA 12.9 (driver 575+, vLLM's cu129 index) or 13.0 (driver 580+, PyPI): update the driver" >&2
  exit 1
fi
gpus="$(nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits | wc -l)"
echo "host: ${gpus} GPUs, driver ${driver:-?} for CUDA ${cuda}: vLLM's ${variant} wheels; ${PYTHON} ${pyver} with venv, Python.h and a C compiler"

run() {   # prints a command, runs it unless --dry-run
  echo "+ $*"
  [ "$DRY" = 1 ] || "$@"
}
check_vllm() {   # the installed vLLM carries both gpt-oss fixes, read from its own source
  local root
  root="$("$VLLM_ENV/bin/python" -c 'import os, vllm; print(os.path.dirname(vllm.__file__))')"
  grep -q "reasoning_end_token_ids_suffix" "$root/reasoning/gptoss_reasoning_parser.py" || {
    echo "the installed vLLM lacks the gpt-oss reasoning-parser fix (PR #28000)" >&2; return 1; }
  grep -rqs "def get_harmony_structural_tag" "$root" || {
    echo "the installed vLLM lacks the Harmony structural tag for constrained replies (PR #45560)" >&2; return 1; }
}
check_installed() {   # the fixes, then every flag serve_vllm.sh passes, before any GPU is used
  [ -x "$VLLM_ENV/bin/vllm" ] || { echo "no vllm in $VLLM_ENV/bin: run this script without --check-only" >&2; return 1; }
  [ "$FIX_CHECK" = 0 ] || check_vllm
  PATH="$VLLM_ENV/bin:$PATH" bash launch/serve_vllm.sh --check-flags
}
if [ "$CHECK_ONLY" = 1 ]; then check_installed; exit $?; fi

# --- the vLLM environment
run "$PYTHON" -m venv "$VLLM_ENV"
run "$VLLM_ENV/bin/python" -m pip install -q --upgrade pip
if [ "$DRY" = 1 ]; then
  echo "+ $VLLM_ENV/bin/python -m pip install -q ${vllm_pip[*]}"
  echo "+ check_vllm (the installed vLLM's source carries PR #28000 and PR #45560)"
  echo "+ launch/serve_vllm.sh --check-flags (vllm serve --help=all lists every flag it passes)"
else
  "$VLLM_ENV/bin/python" -m pip install -q "${vllm_pip[@]}" || {
    echo "pip could not install ${vllm_pip[0]} (${variant}): if no such wheel exists, pick another release with --cu129-version or update the driver to 580+ (CUDA 13)" >&2
    exit 1; }
  check_installed
fi

# --- the project environment (no vLLM)
run "$PYTHON" -m venv "$PROJECT_ENV"
run "$PROJECT_ENV/bin/python" -m pip install -q --upgrade pip
run "$PROJECT_ENV/bin/python" -m pip install -q -e ".[llm,solvers,plots,sweep,curves,gpu]"

cat <<NEXT
next: serve the model from the vLLM environment, in tmux (or the systemd unit of docs/gpu_host.md):
  tmux new -s vllm "source $VLLM_ENV/bin/activate && launch/serve_vllm.sh; read -p 'serve_vllm.sh ended (above: why); Enter closes'"
then, from the project environment, once it prints "all ... replicas healthy":
  source $PROJECT_ENV/bin/activate && python -m countermem_jax.preflight --config=configs/paper.py:spider,react,gptoss
NEXT
