#!/usr/bin/env bash
# Makes the two Python environments of a GPU host (docs/gpu_host.md), then prints the next command.
#
#   launch/install_gpu_host.sh [--vllm-env DIR] [--project-env DIR] [--python python3] [--dry-run]
#                              [--no-fix-check]
#
#   vLLM environment    (default ../venv-vllm): vLLM alone, as vLLM asks (its own torch and CUDA
#                       libraries), pinned to "vllm>=VLLM_MIN,<VLLM_CEILING" below. The installed
#                       vLLM must also carry the gpt-oss fixes for JSON-constrained replies; the
#                       script checks its code for them (check_vllm) and refuses it otherwise
#                       (--no-fix-check skips that, for a vLLM whose notes you checked yourself).
#   project environment (default ../venv-countermem): this package with the `gpu` extra (CUDA
#                       jaxlib for --jax_gpu) and the sweep, plots and LLM-client extras: no vLLM
#                       (the `serve` extra is never installed beside jax[cuda12]).
#
# First it checks the host: nvidia-smi present, and the driver's CUDA version at least
# MIN_CUDA (the vLLM wheels of the pinned releases are built for CUDA 12.9; an older driver
# fails at the first kernel). --dry-run prints every command and runs none (the checks still
# run). The versions and why: docs/gpu_host.md "Versions".
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_MIN=0.19.0      # the gpt-oss reasoning parser that no longer lets a reply escape its JSON
                     # constraint (vLLM PR #28000, merged 2025-11; present in the v0.19.0 source)
VLLM_CEILING=0.32    # exclusive: no newer minor than the newest release seen when this was
                     # written (v0.31.0); raise it after a preflight GO on a newer one
MIN_CUDA=12.9
VLLM_ENV=../venv-vllm; PROJECT_ENV=../venv-countermem; PYTHON=python3; DRY=0; FIX_CHECK=1
while [ $# -gt 0 ]; do
  case "$1" in
    --vllm-env) VLLM_ENV="$2"; shift 2;;
    --project-env) PROJECT_ENV="$2"; shift 2;;
    --python) PYTHON="$2"; shift 2;;
    --dry-run) DRY=1; shift;;
    --no-fix-check) FIX_CHECK=0; shift;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
[ "$VLLM_ENV" != "$PROJECT_ENV" ] || { echo "--vllm-env and --project-env must differ" >&2; exit 2; }

# --- the host
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: install the NVIDIA driver first" >&2; exit 1; }
cuda="$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
if [ -z "$cuda" ] || [ "$(printf '%s\n%s\n' "$MIN_CUDA" "$cuda" | sort -V | head -n 1)" != "$MIN_CUDA" ]; then
  echo "the NVIDIA driver supports CUDA ${cuda:-?}; vLLM ${VLLM_MIN}-${VLLM_CEILING} wheels need CUDA >= ${MIN_CUDA}: update the driver (575 or newer)" >&2
  exit 1
fi
gpus="$(nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits | wc -l)"
echo "host: ${gpus} GPUs, driver for CUDA ${cuda} (>= ${MIN_CUDA})"

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

# --- the vLLM environment
run "$PYTHON" -m venv "$VLLM_ENV"
run "$VLLM_ENV/bin/python" -m pip install -q --upgrade pip
run "$VLLM_ENV/bin/python" -m pip install -q "vllm>=${VLLM_MIN},<${VLLM_CEILING}"
if [ "$DRY" = 1 ]; then echo "+ check_vllm (the installed vLLM's source carries PR #28000 and PR #45560)"
elif [ "$FIX_CHECK" = 1 ]; then check_vllm; fi

# --- the project environment (no vLLM)
run "$PYTHON" -m venv "$PROJECT_ENV"
run "$PROJECT_ENV/bin/python" -m pip install -q --upgrade pip
run "$PROJECT_ENV/bin/python" -m pip install -q -e ".[llm,solvers,plots,sweep,curves,gpu]"

cat <<NEXT
next: serve the model from the vLLM environment, in tmux (or the systemd unit of docs/gpu_host.md):
  tmux new -s vllm "source $VLLM_ENV/bin/activate && launch/serve_vllm.sh"
then, from the project environment, once it prints "all ... replicas healthy":
  source $PROJECT_ENV/bin/activate && python -m countermem_jax.preflight --config=configs/paper.py:spider,react,gptoss
NEXT
