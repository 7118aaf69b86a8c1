"""One writer per phase on a workdir, the config checked before it writes (docs/running.md)."""
import contextlib
import functools
import json
import os
import pathlib
import socket
from typing import Iterator

import filelock

from countermem_jax import domains
from countermem_jax.phases import config_fingerprint, config_validation
from countermem_jax.phases.config_fingerprint import FINGERPRINT_FILE, LOCK_DIR
from countermem_jax.protocol import provenance
from countermem_jax.protocol.splits import SplitError


class WorkdirBusy(RuntimeError):
    """Another process runs this phase on this workdir (the message names its pid and host)."""


@contextlib.contextmanager
def phase_lock(root: pathlib.Path, phase: str) -> Iterator[None]:
    """Holds ``root/.locks/<phase>.lock``; refuses at once when another process holds it."""
    owner = root / LOCK_DIR / f"{phase}.owner"
    lock = filelock.FileLock(str(root / LOCK_DIR / f"{phase}.lock"), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        holder = dict.fromkeys(("pid", "host", "since"), "?")
        with contextlib.suppress(OSError, ValueError, TypeError):
            holder.update(json.loads(owner.read_text()))
        raise WorkdirBusy(f"workdir {root}: phase {phase} is already running (pid {holder['pid']} "
                          f"on host {holder['host']}, since {holder['since']})") from None
    try:
        owner.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "since": provenance.now_utc()}))
        yield
    finally:
        with contextlib.suppress(OSError):
            owner.unlink()
        lock.release()


def _written(root: pathlib.Path) -> dict:
    """{relative path: (size, mtime)} of the files under ``root`` but the guard's own."""
    return {str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in root.rglob("*") if path.is_file()
            and path.relative_to(root).parts[0] not in (LOCK_DIR, FINGERPRINT_FILE)}


def _take_back(root: pathlib.Path, phase: str, made: list) -> None:
    """Removes a refused run's lock files, then the empty folders it made (``made``, deepest
    first; in a workdir it made, every empty folder in it)."""
    for name in (f"{phase}.lock", f"{phase}.owner", "fingerprint.lock"):
        with contextlib.suppress(OSError):
            (root / LOCK_DIR / name).unlink()
    inside = [pathlib.Path(f) for f, _, _ in os.walk(root, topdown=False)] if root in made else []
    for folder in [*inside, *made]:
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def enter_phase(cfg, root, phase: str) -> Iterator[None]:
    """Validates ``cfg``, holds the phase lock, checks and (but for evaluate) records the config's
    fingerprint, and takes back what a refused run made (docs/running.md, "Workdir safety")."""
    config_validation.validate(cfg)
    root = pathlib.Path(root)
    # What this run makes, deepest first (a workdir with a lock folder keeps its folders).
    made = [folder for folder in (root / LOCK_DIR, root, *root.parents) if not folder.exists()]
    refused, recorded, before = False, False, None
    try:
        with phase_lock(root, phase):
            try:
                config_fingerprint.check(cfg, root, phase)
                recorded = phase != "evaluate" and config_fingerprint.record(cfg, root, phase)
                before = _written(root) if recorded or made else None
                yield
            except Exception as err:
                refused = isinstance(err, config_fingerprint.WorkdirMismatch) or (
                    before is not None and _written(root) == before)
                inputs = (config_validation.ConfigError, SplitError, *domains.DATA_ERRORS)
                if recorded and (refused or isinstance(err, inputs)):
                    config_fingerprint.forget(root, phase)
                raise
    finally:
        if refused and made:   # after ``phase_lock`` let go of the lock
            _take_back(root, phase, made)


def guarded_phase(phase: str):
    """Decorates ``fn(cfg, workdir, ...)`` so that it runs inside ``enter_phase``."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(cfg, workdir_path, *args, **kwargs):
            with enter_phase(cfg, workdir_path, phase):
                return fn(cfg, workdir_path, *args, **kwargs)
        return run
    return wrap
