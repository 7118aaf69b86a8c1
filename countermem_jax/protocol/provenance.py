"""The code version a result was made with (a run directory carries its provenance)."""
import datetime
import functools
import importlib.metadata
import pathlib
import subprocess

PACKAGE = "countermem-jax"
UNKNOWN = "unknown"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The version of the code running now (computed once per process)."""
    root = pathlib.Path(__file__).resolve().parents[2]
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=root,
                                 capture_output=True, text=True, timeout=30, check=True)
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return f"{PACKAGE} {importlib.metadata.version(PACKAGE)}"
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second (when a result or a lock was made)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
