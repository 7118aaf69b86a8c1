"""Where the binaries' JAX runs: on the CPU unless ``--jax_gpu``, and never preallocating a GPU.

On a GPU host vLLM holds most of every GPU's memory, and the selector's small MLP gains nothing
from a GPU; JAX reads ``JAX_PLATFORMS`` at import, so ``choose_platform()`` runs in a binary's
entry before anything imports JAX.
"""
import os
import sys

from absl import flags

FLAG = "jax_gpu"
flags.DEFINE_bool(FLAG, False, "Let JAX use a GPU (needs the `gpu` extra); by default it runs on "
                  "the CPU, beside the vLLM servers that hold the GPUs. JAX never preallocates.")


def _asked_for_gpu(argv: list[str]) -> bool | None:
    """The ``--jax_gpu`` flag as absl would parse it (last one wins); None when not given."""
    asked = None
    for arg in argv[1:]:
        if arg == "--":
            break
        if arg in (f"--{FLAG}", f"--{FLAG}=true", f"--{FLAG}=True", f"--{FLAG}=1"):
            asked = True
        elif arg in (f"--no{FLAG}", f"--{FLAG}=false", f"--{FLAG}=False", f"--{FLAG}=0"):
            asked = False
    return asked


def choose_platform(argv: list[str] | None = None) -> None:
    """Sets JAX's platform and allocator in the environment before JAX is imported (module
    docstring); child processes (checkers, Ray workers started from here) inherit them."""
    asked = _asked_for_gpu(sys.argv if argv is None else argv)
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # read when a GPU backend starts
    if asked:
        os.environ["JAX_PLATFORMS"] = "cuda,cpu"
    elif asked is False or "JAX_PLATFORMS" not in os.environ:
        os.environ["JAX_PLATFORMS"] = "cpu"
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
