"""Which phase runs on a workdir, and which may start beside it (docs/running.md, "Phases in
order").
"""
import contextlib
import datetime
import json
import os
import pathlib
import socket
from typing import Iterator

import filelock

from countermem_jax.runtime.errors import UserError

LOCK_DIR = ".locks"
ENTRY_LOCK = "entry.lock"   # held while a phase checks the others and takes its own lock
PHASES = ("build_memory", "train_selector", "evaluate")
# What each phase may read of the others' outputs: build_memory's frozen store, train_selector's
# checkpoints and their fingerprints (``reads`` in workdir_guard narrows it per config).
MAY_READ = {"build_memory": (), "train_selector": ("build_memory",),
            "evaluate": ("build_memory", "train_selector")}


class WorkdirBusy(UserError, RuntimeError):
    """A phase runs on this workdir that this one may not run beside (the message names its pid,
    host and start)."""


def _owner(root: pathlib.Path, phase: str) -> dict:
    """What a running phase wrote about itself (``?`` for what cannot be read)."""
    holder = {**dict.fromkeys(("pid", "host", "since"), "?"), "reads": MAY_READ.get(phase, ())}
    with contextlib.suppress(OSError, ValueError, TypeError):
        holder.update(json.loads((root / LOCK_DIR / f"{phase}.owner").read_text()))
    return holder


def _who(holder: dict) -> str:
    return f"pid {holder['pid']} on host {holder['host']}, since {holder['since']}"


def _held(root: pathlib.Path, phase: str) -> bool:
    """True while another holder has ``phase``'s lock (a killed holder's lock is free)."""
    path = root / LOCK_DIR / f"{phase}.lock"
    if not path.exists():
        return False
    probe = filelock.FileLock(str(path), timeout=0)
    try:
        probe.acquire()
    except filelock.Timeout:
        return True
    probe.release()
    return False


def running(root, phases=PHASES) -> dict:
    """{phase: its owner record} of the ``phases`` running on ``root`` now; {} for a workdir no
    phase ever locked or that this process cannot write (no phase of this code writes there).
    Only lock files already there are opened: a reader leaves the workdir as it was."""
    root = pathlib.Path(root)
    entry = root / LOCK_DIR / ENTRY_LOCK
    try:
        with (filelock.FileLock(str(entry), timeout=60) if entry.exists()
              else contextlib.nullcontext()):
            return {p: _owner(root, p) for p in phases if _held(root, p)}
    except OSError:
        return {}


def refuse_if_running(root, reader: str, phases=PHASES) -> None:
    """Raises ``WorkdirBusy`` naming the first of ``phases`` running on ``root``: ``reader``
    (the report, inspect_store) reads what it writes."""
    for phase, holder in running(root, phases).items():
        raise WorkdirBusy(f"workdir {root}: {reader} reads what {phase} writes, and {phase} is "
                          f"running on it ({_who(holder)}); run {reader} once it has finished")


def _conflict(root: pathlib.Path, phase: str, reads: tuple) -> str | None:
    """Why ``phase`` (reading ``reads``) may not start beside the phases running on ``root``."""
    for other in PHASES:
        if other == phase or not _held(root, other):
            continue
        holder = _owner(root, other)
        if other in reads:
            return (f"workdir {root}: {phase} reads what {other} writes, and {other} is running "
                    f"on it ({_who(holder)}); run {phase} once it has finished")
        if phase in holder["reads"]:
            return (f"workdir {root}: {other} is running on it and reads what {phase} writes "
                    f"({_who(holder)}); run {phase} once it has finished")
    return None


@contextlib.contextmanager
def hold(root, phase: str, reads: tuple = ()) -> Iterator[None]:
    """Holds ``root/.locks/<phase>.lock`` while the block runs; refuses at once (``WorkdirBusy``)
    when another process runs ``phase`` on ``root``, a phase whose outputs ``phase`` reads
    (``reads``), or a phase that reads ``phase``'s."""
    root = pathlib.Path(root)
    owner = root / LOCK_DIR / f"{phase}.owner"
    lock = filelock.FileLock(str(root / LOCK_DIR / f"{phase}.lock"), timeout=0)
    with filelock.FileLock(str(root / LOCK_DIR / ENTRY_LOCK), timeout=60):
        try:
            lock.acquire()
        except filelock.Timeout:
            raise WorkdirBusy(f"workdir {root}: phase {phase} is already running "
                              f"({_who(_owner(root, phase))})") from None
        reason = _conflict(root, phase, tuple(reads))
        if reason:
            lock.release()
            raise WorkdirBusy(reason)
        try:
            owner.write_text(json.dumps({
                "pid": os.getpid(), "host": socket.gethostname(), "reads": list(reads),
                "since": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds")}))
        except BaseException:
            lock.release()
            raise
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            owner.unlink()
        lock.release()
