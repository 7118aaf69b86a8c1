"""Where benchmark data lives: ``$COUNTERMEM_DATA`` or ``../shared/benchdata`` beside the repo."""
import os
import pathlib

# The checkout root (this file is countermem_jax/runtime/paths.py); data sits beside it, not inside.
_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def data_root() -> pathlib.Path:
    """The benchmark data folder (it may not exist; loaders say so clearly)."""
    env = os.environ.get("COUNTERMEM_DATA")
    if env:
        return pathlib.Path(env).expanduser().resolve()
    return (_REPO_ROOT.parent / "shared" / "benchdata").resolve()


def require_data(*parts: str) -> pathlib.Path:
    """A path under the data root, or FileNotFoundError saying how to provide it."""
    path = data_root().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"benchmark data not found: {path} (set COUNTERMEM_DATA to the folder that holds "
            f"{parts[0]!r}; see docs/data.md)")
    return path
