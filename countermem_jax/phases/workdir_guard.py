"""One writer per phase on a workdir, and the config checked before it writes (all phases).

``enter_phase`` validates the config, holds ``WORKDIR/.locks/<phase>.lock`` while the phase runs
(a second process is refused at once, naming the holder, so two builds never interleave their
writes of ``store.jsonl``; the kernel drops a killed holder's lock) and checks and records the
config's fingerprint (``config_fingerprint``).
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
from countermem_jax.phases.config_fingerprint import LOCK_DIR, PhaseGuard, checked_phases, now_utc
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


@contextlib.contextmanager
def enter_phase(cfg, root, phase: str) -> Iterator[PhaseGuard]:
    """Validates the config, takes the phase lock, checks the recorded fingerprints and records
    this phase's own (build_memory, train_selector) before the phase writes anything. A refusal
    of the config's inputs inside the phase (split sizes, splits, missing data), which comes
    before any result, takes that record back: the corrected config is not "another config"."""
    config_validation.validate(cfg)
    root = pathlib.Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with phase_lock(root, phase):
        guard = PhaseGuard(cfg, root, phase)
        guard.check(checked_phases(cfg, phase))
        # evaluate writes only metrics, which are recomputable: it checks but never records.
        recorded_now = phase != "evaluate" and guard.record()
        try:
            yield guard
        except (config_validation.ConfigError, SplitError, *domains.DATA_ERRORS):
            if recorded_now:
                guard.forget()
            raise


def guarded_phase(phase: str):
    """Decorates ``fn(cfg, workdir, ...)`` so that it runs inside ``enter_phase``."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(cfg, workdir_path, *args, **kwargs):
            with enter_phase(cfg, workdir_path, phase):
                return fn(cfg, workdir_path, *args, **kwargs)
        return run
    return wrap
