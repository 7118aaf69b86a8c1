"""Faults for the fault tests: a phase held by another process, and a workdir's bytes."""
import contextlib
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

# Holds a phase's lock as a running phase does, until the file ``release`` appears.
_HOLDER = """
import pathlib, sys, time
from countermem_jax.runtime import phase_locks
root, phase, ready, release, *reads = sys.argv[1:]
with phase_locks.hold(root, phase, tuple(reads)):
    pathlib.Path(ready).touch()
    while not pathlib.Path(release).exists():
        time.sleep(0.05)
"""


@contextlib.contextmanager
def phase_running(root, phase: str, reads: tuple = (), flags_dir=None):
    """Another process holds ``phase``'s lock on ``root`` (as that phase does while it runs)
    for the block; yields its pid."""
    flags_dir = pathlib.Path(flags_dir or pathlib.Path(root).parent)
    ready, release = flags_dir / f"{phase}.ready", flags_dir / f"{phase}.release"
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root), phase, str(ready),
                             str(release), *reads], env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready, proc)
        yield proc.pid
    finally:
        release.touch()
        try:
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        ready.unlink(missing_ok=True)
        release.unlink(missing_ok=True)


def wait_for(path: pathlib.Path, proc, seconds: float = 180) -> None:
    """Returns once ``path`` exists; fails when ``proc`` ends first or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def stored(root) -> dict:
    """{relative path: bytes} of every file under ``root`` but the lock folder (what a refused
    command must leave as it was)."""
    root = pathlib.Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".locks" not in p.relative_to(root).parts}
