"""One config per workdir: ``WORKDIR/fingerprint.json`` holds {phase: {"sha256", "fields",
"version", "recorded_at", "code_version"}} (docs/running.md, "Workdir safety")."""
import contextlib
import hashlib
import json
import pathlib
from typing import Iterator

import filelock
from flax import traverse_util

from countermem_jax.method.memory.persistence import write_lines_atomic
from countermem_jax.phases import config_validation
from countermem_jax.protocol import config_defaults, provenance
from countermem_jax.runtime.errors import UserError
from countermem_jax.runtime.phase_locks import LOCK_DIR

FINGERPRINT_FILE = "fingerprint.json"
NOT_FINGERPRINTED = (
    "eval", "data.data_dir", "data.bird_json", "data.bird_db_root", "data.swebench_json",
    "data.swebench_checkouts", "data.lean_project", "splits.manifest", "backbone.base_urls",
    "backbone.max_concurrency", "backbone.timeout_s", "backbone.max_attempts",
    "backbone.n_threads", "backbone.cache_dir", "selector.seeds", "construction.wave_size")
# The rules' version, recorded with each fingerprint (none: 1); another version is refused.
VERSION = 1


class WorkdirMismatch(UserError, ValueError):
    """The config differs from the workdir's; the message lists ``path: recorded -> now``."""


def _leaves(cfg) -> dict:
    """{dotted path: JSON value} of every leaf of a config (tuples become lists)."""
    return json.loads(json.dumps(traverse_util.flatten_dict(cfg.to_dict(), sep="."), default=str))


def fingerprint_fields(cfg, phase: str) -> dict:
    """The fingerprinted fields of ``cfg`` for ``phase`` as {dotted path: JSON value}: the
    ``selector`` section's for train_selector, the others' for build_memory."""
    return {path: value for path, value in sorted(_leaves(cfg).items())
            if (path.split(".")[0] == "selector") == (phase == "train_selector")
            and not any(f"{path}.".startswith(f"{s}.") for s in NOT_FINGERPRINTED)}


def _differences(recorded: dict, current: dict) -> list[str]:
    """``path: recorded -> current`` for each differing field; one the record lacks reads as its
    ``base_config()`` value, one ``current`` lacks as ``<absent>``."""
    absent = "<absent>"
    defaults = _leaves(config_defaults.base_config())
    recorded = {**{path: defaults[path] for path in current if path in defaults}, **recorded}
    return [f"{path}: {recorded.get(path, absent)!r} -> {current.get(path, absent)!r}"
            for path in sorted(set(recorded) | set(current))
            if recorded.get(path, absent) != current.get(path, absent)]


def _read(root: pathlib.Path) -> dict:
    """The recorded fingerprints ({} when none yet); a corrupt file is a ``WorkdirMismatch``."""
    path = root / FINGERPRINT_FILE
    try:
        recorded = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(recorded, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("fields"), dict)
                for v in recorded.values()):
            raise ValueError("expected {phase: {\"fields\": {...}}}")
    except (OSError, ValueError) as err:
        raise WorkdirMismatch(f"{path}: unreadable fingerprint ({err}); the workdir's config "
                              "cannot be checked, use a new --workdir") from None
    return recorded


def check(cfg, root: pathlib.Path, phase: str) -> None:
    """Refuses ``cfg`` where it differs from a fingerprint ``phase`` must match: build_memory's
    always, train_selector's when training or when the trained (DQN) selector is evaluated."""
    recorded = _read(root)
    results = ("store.jsonl", "store_frozen.jsonl", "selector", "metrics.json", "log.jsonl")
    if not recorded and any((root / name).exists() for name in results):
        raise WorkdirMismatch(f"workdir {root} holds results but no {FINGERPRINT_FILE} (made "
                              "before config fingerprints); its config cannot be checked, use a "
                              "new --workdir")
    trained = phase == "train_selector" or (
        phase == "evaluate" and config_validation.lookup(cfg, "eval.selector") == "dqn")
    for section in [s for s in ("build_memory", "train_selector")[:1 + trained] if s in recorded]:
        version = recorded[section].get("version", 1)
        if version != VERSION:
            raise WorkdirMismatch(f"workdir {root} was made by {section} under config fingerprint "
                                  f"version {version!r}, this code reads version {VERSION}; use a "
                                  "new --workdir (or the code it was made with)")
        if diff := _differences(recorded[section]["fields"], fingerprint_fields(cfg, section)):
            raise WorkdirMismatch(f"workdir {root} was made by {section} with another config; "
                                  f"differing fields (recorded -> now): {'; '.join(diff)}; use a "
                                  "new --workdir or the config it was made with")


@contextlib.contextmanager
def _editing(root: pathlib.Path) -> Iterator[dict]:
    """Read-modify-write of ``root``'s fingerprints under their lock (none left: no file)."""
    with filelock.FileLock(str(root / LOCK_DIR / "fingerprint.lock"), timeout=60):
        recorded = _read(root)
        before = dict(recorded)   # entries are added, replaced or removed, not edited
        yield recorded
        if not recorded:
            (root / FINGERPRINT_FILE).unlink(missing_ok=True)
        elif recorded != before:
            text = json.dumps(recorded, indent=1, sort_keys=True)
            write_lines_atomic(root / FINGERPRINT_FILE, [text])   # fsynced, then renamed


def record(cfg, root, phase: str) -> bool:
    """Records ``phase``'s fingerprint once (later runs only check it); True if it did."""
    with _editing(pathlib.Path(root)) as recorded:
        if phase in recorded:
            return False
        fields = fingerprint_fields(cfg, phase)
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        recorded[phase] = {"sha256": digest, "fields": fields, "version": VERSION,
                           "recorded_at": provenance.now_utc(),
                           "code_version": provenance.code_version()}
        return True


def forget(root, phase: str) -> None:
    """Takes back ``phase``'s fingerprint (its config was refused before any result)."""
    with _editing(pathlib.Path(root)) as recorded:
        recorded.pop(phase, None)


def copy_fingerprint(source, target, *phases: str) -> None:
    """Copies ``source``'s fingerprints of ``phases`` (those it has) into ``target``'s, for a study
    cell that shares another cell's store or selector: ``target`` counts them as run."""
    recorded = json.loads((pathlib.Path(source) / FINGERPRINT_FILE).read_text())
    with _editing(pathlib.Path(target)) as mine:
        mine.update({phase: recorded[phase] for phase in phases if phase in recorded})
