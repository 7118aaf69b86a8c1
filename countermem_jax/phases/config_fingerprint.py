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
from countermem_jax.protocol import provenance
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
# Fields added to the config since version 1, with the value under which the code before each
# behaved: a recorded fingerprint that lacks one reads it as this value, so an older workdir
# still matches a config that keeps it and only another value is a difference. A new
# fingerprinted field gets an entry here (or raises the version).
BEFORE_THE_FIELD = traverse_util.flatten_dict({
    "backbone": dict(api_key_env="", constraints=True, cpu_model="", max_tokens_on_truncation=0,
                     repetition_penalty_on_truncation=1.0),
    "baselines": {"best_of_n": dict(k=4, temperature=0.7),
                  "expel": dict(fewshot_k=2, max_insights=20, success_batch=4),
                  "generative_agents": dict(recency_decay=0.995, reflection_threshold=150,
                                            reflection_window=100, top_k=3,
                                            weights=[1.0, 1.0, 1.0]),
                  "memgpt": dict(block_chars=1200, context_chars=4000, max_steps=3, page_size=5),
                  "reasoningbank": dict(matts_k=3, matts_temperature=0.7, top_k=1),
                  "voyager": dict(top_k=5)},
    "construction": dict(corrections="verified", transfer_checks=0),
    "data": dict(bugsinpy_checkouts="", bugsinpy_root="", max_conflicts=200_000, sat_families=[],
                 smt_logics=[], smt_max_rlimit=0, smt_max_timeout_ms=10_000,
                 vericoding_sources=[]),
    "memory": {"admission": dict(threshold=0.1, w_conflict=1.0, w_delta=1.0, w_repeat=0.7,
                                 w_reuse=0.5),
               "judge": dict(max_tokens=1024, reasoning_effort="low", temperature=0.0),
               "retention_weights": dict(alpha=1.0, beta=1.0, eta=0.7, omega=0.5),
               **dict(fallback_condition="exclude", reuse_rho=0.3, revision="llm",
                      suppress_after_uses=3, suppress_below=0.0)},
    "method": "countermem",
    "selector": {"dqn": dict(adam_eps=1e-8, epsilon_end=0.05, epsilon_start=0.3,
                             exploration_fraction=1.0, gamma=0.95, hidden=[64, 64],
                             learning_rate=1e-3, replay_capacity=10_000),
                 "reward": dict(call_penalty=0.15, failure_penalty=0.25, token_penalty=0.02,
                                token_scale=1e4),
                 "wave_size": 1},
    "splits": dict(folds=0, group_by_reference=True, hold_out_seen=False, n_build_envs=35,
                   n_eval_envs=34, seed=0),
}, sep=".")


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
    ``BEFORE_THE_FIELD`` value, one ``current`` lacks as ``<absent>``."""
    absent = "<absent>"
    recorded = {**{path: BEFORE_THE_FIELD[path] for path in current if path in BEFORE_THE_FIELD},
                **recorded}
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
