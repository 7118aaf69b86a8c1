"""Config fingerprints: one config per workdir (provenance of every result file). The first
phase that writes results records its config in ``WORKDIR/fingerprint.json``; later phases are
refused, in one line naming each differing field, if theirs differs (docs/running.md, "Workdir
safety", gives the rules)."""
import datetime
import hashlib
import json
import os
import pathlib
from typing import Iterator

import filelock

from countermem_jax.phases import config_validation
from countermem_jax.protocol import config_defaults, provenance

FINGERPRINT_FILE = "fingerprint.json"
LOCK_DIR = ".locks"
# Sections fingerprinted by a later phase than build_memory.
PHASE_SECTIONS = {"train_selector": ("selector",)}
NOT_FINGERPRINTED = (
    "eval",
    "data.data_dir", "data.bird_json", "data.bird_db_root", "data.swebench_json",
    "data.swebench_checkouts", "data.lean_project", "splits.manifest",
    "backbone.base_urls", "backbone.max_concurrency", "backbone.timeout_s",
    "backbone.max_attempts", "backbone.n_threads", "backbone.cache_dir",
    "selector.seeds", "construction.wave_size",
)
# The rules' version, recorded with each fingerprint (none: 1); another version is refused. A
# field a record lacks reads as its ``base_config()`` value (docs/running.md).
VERSION = 1
# What a workdir made before fingerprints existed holds; such a workdir cannot be checked.
_RESULT_FILES = ("store.jsonl", "store_frozen.jsonl", "selector", "metrics.json", "log.jsonl")


class WorkdirMismatch(ValueError):
    """The config differs from the workdir's; the message lists ``path: recorded -> now``."""


def _leaves(tree: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(dotted path, value) of every leaf of a nested dict, in sorted order."""
    for key in sorted(tree):
        value, path = tree[key], prefix + key
        if isinstance(value, dict):
            yield from _leaves(value, path + ".")
        else:
            yield path, value


def fingerprint_fields(cfg, phase: str) -> dict:
    """The fingerprinted fields of ``cfg`` for ``phase`` as {dotted path: JSON value}."""
    later = {s for sections in PHASE_SECTIONS.values() for s in sections}
    own = PHASE_SECTIONS.get(phase)
    fields = {}
    for path, value in _leaves(cfg.to_dict()):
        section = path.split(".")[0]
        wanted = section in own if own else section not in later
        if wanted and not any(path == s or path.startswith(s + ".") for s in NOT_FINGERPRINTED):
            fields[path] = json.loads(json.dumps(value, default=str))  # tuples -> lists
    return fields


def _differences(recorded: dict, current: dict) -> list[str]:
    """``path: recorded -> current`` for every field that differs, absent fields included (a
    field absent from the record reads as its ``base_config()`` value, ``VERSION``)."""
    absent = "<absent>"
    defaults = {path: value for path, value in _leaves(config_defaults.base_config().to_dict())
                if path in current and path not in recorded}
    recorded = {**json.loads(json.dumps(defaults, default=str)), **recorded}
    return [f"{path}: {recorded.get(path, absent)!r} -> {current.get(path, absent)!r}"
            for path in sorted(set(recorded) | set(current))
            if recorded.get(path, absent) != current.get(path, absent)]


class PhaseGuard:
    """Reads, checks and (once per phase) records ``fingerprint.json``: {phase: {"sha256",
    "fields", "version", "recorded_at", "code_version"}}."""

    def __init__(self, cfg, root: pathlib.Path, phase: str):
        self.cfg, self.root, self.phase = cfg, root, phase
        self.path = root / FINGERPRINT_FILE

    def _read(self) -> dict:
        """The recorded fingerprints ({} when none yet); a corrupt file is a ``WorkdirMismatch``."""
        try:
            recorded = json.loads(self.path.read_text())
            if not isinstance(recorded, dict) or not all(
                    isinstance(v, dict) and isinstance(v.get("fields"), dict)
                    for v in recorded.values()):
                raise ValueError("expected {phase: {\"fields\": {...}}}")
            return recorded
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            raise WorkdirMismatch(f"{self.path}: unreadable fingerprint ({err}); the workdir's "
                                  "config cannot be checked, use a new --workdir") from None

    def check(self, sections: tuple[str, ...]) -> None:
        """Refuses the config if it differs from a recorded fingerprint of ``sections``."""
        recorded = self._read()
        if not recorded and any((self.root / name).exists() for name in _RESULT_FILES):
            raise WorkdirMismatch(f"workdir {self.root} holds results but no {FINGERPRINT_FILE} "
                                  "(made before config fingerprints); its config cannot be "
                                  "checked, use a new --workdir")
        for section in sections:
            if section in recorded:
                version = recorded[section].get("version", 1)
                if version != VERSION:
                    raise WorkdirMismatch(
                        f"workdir {self.root} was made by {section} under config fingerprint "
                        f"version {version!r}, this code reads version {VERSION}; use a new "
                        "--workdir (or the code it was made with)")
                diff = _differences(recorded[section]["fields"],
                                    fingerprint_fields(self.cfg, section))
                if diff:
                    raise WorkdirMismatch(
                        f"workdir {self.root} was made by {section} with another config; "
                        f"differing fields (recorded -> now): {'; '.join(diff)}; use a new "
                        "--workdir or the config it was made with")

    def record(self) -> bool:
        """Records this phase's fingerprint once (later runs only check it); True if it did."""
        with self._file_lock():
            recorded = self._read()
            if self.phase in recorded:
                return False
            fields = fingerprint_fields(self.cfg, self.phase)
            recorded[self.phase] = {"sha256": hashlib.sha256(json.dumps(
                fields, sort_keys=True).encode()).hexdigest(), "fields": fields,
                                    "version": VERSION, "recorded_at": now_utc(),
                                    "code_version": provenance.code_version()}
            self._write(recorded)
            return True

    def forget(self) -> None:
        """Takes back this phase's fingerprint (its config was refused before any result)."""
        with self._file_lock():
            recorded = self._read()
            recorded.pop(self.phase, None)
            if recorded:
                self._write(recorded)
            else:
                self.path.unlink(missing_ok=True)

    def _file_lock(self) -> filelock.FileLock:
        """The lock serialising read-modify-write of ``fingerprint.json``."""
        return filelock.FileLock(str(self.root / LOCK_DIR / "fingerprint.lock"), timeout=60)

    def _write(self, recorded: dict) -> None:
        """Atomic replace of ``fingerprint.json`` (temporary file, then rename)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(recorded, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def copy_fingerprint(source, target, *phases: str) -> None:
    """Copies the recorded fingerprint entries of ``phases`` from workdir ``source`` into
    ``target``'s, so that ``target`` counts those phases as run with that config (a study cell
    that shares another cell's store or selector); entries ``source`` lacks are skipped."""
    recorded = json.loads((pathlib.Path(source) / FINGERPRINT_FILE).read_text())
    path = pathlib.Path(target) / FINGERPRINT_FILE
    mine = json.loads(path.read_text()) if path.exists() else {}
    mine.update({phase: recorded[phase] for phase in phases if phase in recorded})
    path.write_text(json.dumps(mine, indent=1, sort_keys=True))


def now_utc() -> str:
    """Current UTC time, ISO-8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def checked_phases(cfg, phase: str) -> tuple[str, ...]:
    """Whose fingerprints ``phase`` must match: build_memory's always, train_selector's when
    training or when the trained (DQN) selector is evaluated."""
    uses_selector = phase == "train_selector" or (
        phase == "evaluate" and config_validation.lookup(cfg, "eval.selector") == "dqn")
    return ("build_memory", "train_selector") if uses_selector else ("build_memory",)
