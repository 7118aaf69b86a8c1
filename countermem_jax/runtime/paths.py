"""Where benchmark data lives: ``$COUNTERMEM_DATA`` or ``../shared/benchdata`` beside the repo."""
import os
import pathlib

# The checkout root (this file is countermem_jax/runtime/paths.py); data sits beside it, not inside.
_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def data_root() -> pathlib.Path:
    """The benchmark data folder (it may not exist: each loader names what it misses and the
    command that gets it, ``domains/base.require``)."""
    env = os.environ.get("COUNTERMEM_DATA")
    if env:
        return pathlib.Path(env).expanduser().resolve()
    return (_REPO_ROOT.parent / "shared" / "benchdata").resolve()

