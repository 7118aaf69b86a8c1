"""Where benchmark data lives (``$COUNTERMEM_DATA`` or ``../shared/benchdata`` beside the repo),
and which path names the binaries take (valid UTF-8)."""
import os
import pathlib

from countermem_jax.runtime.errors import UserError

# The checkout root (this file is countermem_jax/runtime/paths.py); data sits beside it, not inside.
_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def data_root() -> pathlib.Path:
    """The benchmark data folder (it may not exist: each loader names what it misses and the
    command that gets it, ``domains/base.require``)."""
    env = os.environ.get("COUNTERMEM_DATA")
    if env:
        return pathlib.Path(env).expanduser().resolve()
    return (_REPO_ROOT.parent / "shared" / "benchdata").resolve()



class NotUTF8(UserError, ValueError):
    """A path whose name is not valid UTF-8 (bytes the file system took but no text names)."""


def shown(path) -> str:
    """``path`` as text to print, bytes that are not UTF-8 written as ``\\xNN``."""
    raw = path if isinstance(path, bytes) else os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def check_utf8(path, what: str = "path") -> None:
    """Refuses (``NotUTF8``, one line) a path whose name is not valid UTF-8: Orbax's checkpoint
    store (tensorstore) cannot open it, and the JSON files and lines printed name every path."""
    raw = path if isinstance(path, bytes) else os.fsencode(path)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotUTF8(f"{what}={shown(raw)}: the name is not valid UTF-8 (checkpoints, logs and "
                      "JSON files name their paths in UTF-8); give a path whose name is UTF-8"
                      ) from None
