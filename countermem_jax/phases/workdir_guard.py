"""One writer per phase on a workdir, and the config checked before it writes: ``enter_phase``
validates the config, holds ``WORKDIR/.locks/<phase>.lock`` and checks and records the config's
fingerprint; a run refused before it wrote leaves nothing (docs/running.md, "Workdir safety").
"""
import contextlib
import functools
import json
import os
import pathlib
import socket
from typing import Iterator

import filelock

from countermem_jax import domains
from countermem_jax.phases import config_validation
from countermem_jax.phases.config_fingerprint import (FINGERPRINT_FILE, LOCK_DIR, PhaseGuard,
                                                      WorkdirMismatch, checked_phases, now_utc)
from countermem_jax.protocol.splits import SplitError


class WorkdirBusy(RuntimeError):
    """Another process runs this phase on this workdir (the message names its pid and host)."""


@contextlib.contextmanager
def phase_lock(root: pathlib.Path, phase: str) -> Iterator[None]:
    """Holds ``root/.locks/<phase>.lock``; refuses at once when another process holds it."""
    lock_dir = root / LOCK_DIR
    lock_dir.mkdir(parents=True, exist_ok=True)
    owner = lock_dir / f"{phase}.owner"
    lock = filelock.FileLock(str(lock_dir / f"{phase}.lock"), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        try:
            holder = json.loads(owner.read_text())
        except (OSError, ValueError):
            holder = {}
        raise WorkdirBusy(f"workdir {root}: phase {phase} is already running (pid "
                          f"{holder.get('pid', '?')} on host {holder.get('host', '?')}, since "
                          f"{holder.get('since', '?')})") from None
    try:
        owner.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "since": now_utc()}))
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


def _take_back(root: pathlib.Path, phase: str, made: list, locks_made: bool) -> None:
    """Removes what a refused run made: its lock files if it made their folder, then the empty
    folders it made, deepest first (in a workdir it made, every empty folder in it)."""
    if not locks_made:   # a workdir with locks made earlier keeps them and its folders
        return
    for name in (f"{phase}.lock", f"{phase}.owner", "fingerprint.lock"):
        with contextlib.suppress(OSError):
            (root / LOCK_DIR / name).unlink()
    inside = [pathlib.Path(f) for f, _, _ in os.walk(root, topdown=False)] if made else []
    for folder in [*inside, root / LOCK_DIR, *made[1:]]:
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def enter_phase(cfg, root, phase: str) -> Iterator[PhaseGuard]:
    """Validates the config, takes the phase lock, checks the recorded fingerprints and records
    this phase's own before the phase writes. A refusal of the config's inputs (split sizes,
    splits, missing data) takes that record back; any refusal before the phase wrote a file
    takes back all the run made (record, locks, the workdir and parents it created)."""
    config_validation.validate(cfg)
    root = pathlib.Path(root)
    made = [folder for folder in (root, *root.parents) if not folder.exists()]  # deepest first
    locks_made = not (root / LOCK_DIR).exists()
    root.mkdir(parents=True, exist_ok=True)
    refused = False
    try:
        with phase_lock(root, phase):
            guard = PhaseGuard(cfg, root, phase)
            try:
                guard.check(checked_phases(cfg, phase))
            except WorkdirMismatch:
                refused = True
                raise
            # evaluate writes only metrics, which are recomputable: it checks but never records.
            recorded_now = phase != "evaluate" and guard.record()
            before = _written(root) if (recorded_now or made or locks_made) else None
            try:
                yield guard
            except Exception as err:
                refused = before is not None and _written(root) == before
                if recorded_now and (refused or isinstance(err, _INPUT_ERRORS)):
                    guard.forget()
                raise
    finally:
        if refused:   # after ``phase_lock`` let go of the lock
            _take_back(root, phase, made, locks_made)


_INPUT_ERRORS = (config_validation.ConfigError, SplitError, *domains.DATA_ERRORS)


def guarded_phase(phase: str):
    """Decorates ``fn(cfg, workdir, ...)`` so that it runs inside ``enter_phase``."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(cfg, workdir_path, *args, **kwargs):
            with enter_phase(cfg, workdir_path, phase):
                return fn(cfg, workdir_path, *args, **kwargs)
        return run
    return wrap
