"""Where the binaries' JAX runs: on the CPU unless ``--jax_gpu``, and never preallocating a GPU.

On a GPU host vLLM holds about 90 % of every GPU's memory (``--gpu-memory-utilization``), while
JAX by default grabs 75 % of a GPU the moment its backend starts, which fails or starves vLLM. The
selector is an MLP of two 64-unit layers over 98 observation features, updated on batches of 32
(paper Appendix C.2): a GPU does not speed it up measurably, and the phases' time goes to the LLM and the
checkers. So the binaries keep JAX on the CPU (``JAX_PLATFORMS=cpu``); ``--jax_gpu`` lets it use
a GPU (with the ``gpu`` extra's CUDA jaxlib), and then allocating on demand only
(``XLA_PYTHON_CLIENT_PREALLOCATE=false``), beside vLLM. A ``JAX_PLATFORMS`` the user exported
is kept when no flag is given.

JAX reads ``JAX_PLATFORMS`` when it is imported, so ``choose_platform()`` runs in a binary's
entry before anything that imports JAX (this module imports none); where a package's import
already brought JAX in (``python -m countermem_jax.sweep``), it sets JAX's config instead, which
holds until JAX starts its first backend.
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
