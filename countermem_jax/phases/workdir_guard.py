"""One writer per phase on a workdir, phases in order, the config checked before it writes
(docs/running.md)."""
import contextlib
import functools
import os
import pathlib
from typing import Iterator

from countermem_jax import domains
from countermem_jax.phases import config_fingerprint, config_validation
from countermem_jax.phases.config_fingerprint import FINGERPRINT_FILE, LOCK_DIR
from countermem_jax.protocol.splits import SplitError
from countermem_jax.runtime import paths, phase_locks


WorkdirBusy = phase_locks.WorkdirBusy
phase_lock = phase_locks.hold   # (root, phase, reads=()): one writer per phase, phases in order


def reads(cfg, phase: str) -> tuple:
    """The phases whose outputs ``phase`` reads with ``cfg``: training reads the frozen store,
    evaluation the store (or a baseline's memory) and, for the trained DQN, the checkpoints."""
    if phase == "evaluate" and not (cfg.get("method", "countermem") == "countermem"
                                    and config_validation.lookup(cfg, "eval.selector") == "dqn"):
        return ("build_memory",)
    return phase_locks.MAY_READ.get(phase, ())


def _written(root: pathlib.Path) -> dict:
    """{relative path: (size, mtime)} of the files under ``root`` but the guard's own."""
    return {str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in root.rglob("*") if path.is_file()
            and path.relative_to(root).parts[0] not in (LOCK_DIR, FINGERPRINT_FILE)}


def _take_back(root: pathlib.Path, phase: str, made: list) -> None:
    """Removes a refused run's lock files, then the empty folders it made (``made``, deepest
    first; in a workdir it made, every empty folder in it)."""
    for name in (f"{phase}.lock", f"{phase}.owner", "fingerprint.lock", phase_locks.ENTRY_LOCK):
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
    paths.check_utf8(root, "workdir")   # before anything is made: Orbax cannot open such names
    root = pathlib.Path(root)
    # What this run makes, deepest first (a workdir with a lock folder keeps its folders).
    made = [folder for folder in (root / LOCK_DIR, root, *root.parents) if not folder.exists()]
    refused, recorded, before = False, False, None
    try:
        with phase_lock(root, phase, reads(cfg, phase)):
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
