"""Reads evaluated workdirs (the three phases' files, nothing else) into comparable arms."""
import dataclasses
import hashlib
import json
import pathlib
import re

from countermem_jax.protocol import splits as splits_lib
from countermem_jax.experiment import METHOD_LABELS
from countermem_jax.runtime import phase_locks
from countermem_jax.runtime.paths import NotUTF8, check_utf8

NOT_RECORDED = "not recorded"
AGENT_LABELS = {"react": "ReAct", "reflexion": "Reflexion"}
BASE_LABEL = "None"  # Table 1's row for the base agent without memory
CODE_VERSION_FILE = "code_version.txt"


class ReportError(ValueError):
    """The given run directories cannot be reported (together).

    Raised before anything is written; the message is one line naming the workdir(s) and what
    is missing or differs, which the report binary prints as is.
    """


@dataclasses.dataclass
class Run:
    """One evaluation run: its per-task outcomes and those of its own workdir's base run."""
    workdir: str
    name: str
    seed: str | None
    tasks: dict            # task_id -> task_end event (solved, benchmark, tokens, calls, ...)
    base: dict | None      # the same workdir's base run (None for a base run itself)
    groups: dict | None = None  # task_id -> reference group (metrics.json aggregate.per_task);
    #                             None where the workdir did not record them


@dataclasses.dataclass
class Arm:
    """A Table 1 row for one backbone and agent on one configured benchmark: a method and its
    runs (seeds, pooled workdirs)."""
    agent: str
    label: str
    method: str
    runs: list
    backbone: str = NOT_RECORDED
    benchmark: str = "?"


@dataclasses.dataclass
class Provenance:
    """What the report lists per workdir so a reader can tell exactly what was compared."""
    workdir: str
    method: str
    agent: str
    benchmark: str
    eval_ids: tuple
    splits_hash: str
    config_fingerprints: dict
    seeds: list
    store_hash: str
    selector_fingerprints: dict
    code_version: str
    backbone: str
    metrics_files: list
    reference_groups: int | None = None  # groups among the held-out tasks; None: not recorded


def _read_text(path: pathlib.Path, what: str) -> str:
    """A workdir file's text; missing, unreadable or not UTF-8 is a ``ReportError`` naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: no {what}; is this an evaluated workdir?") from None
    except UnicodeDecodeError as err:
        raise ReportError(f"{path}: unreadable {what} (not UTF-8 at byte {err.start})") from None
    except OSError as err:
        raise ReportError(f"{path}: unreadable {what} ({err.strerror or err})") from None


def _json_type(value) -> str:
    """The JSON name of a parsed value's type (what a one-line refusal says it found)."""
    kinds = ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"),
             (list, "a list"), (dict, "an object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def _expect(path: pathlib.Path, value, kind: type, where: str, optional: bool = False):
    """``value`` if it is a ``kind`` (JSON object: dict, list, string), else a ``ReportError``
    naming the file, the field and what it holds; ``optional`` lets null through."""
    if (value is None and optional) or isinstance(value, kind):
        return value
    raise ReportError(f"{path}: {where} is {_json_type(value)}, expected {_json_type(kind())}; "
                      "not a file evaluate wrote (edited or damaged?)")


def _read_json(path: pathlib.Path, what: str, kind: type = dict):
    """Parsed JSON of a workdir file, a ``kind`` at the top; missing, unreadable, not UTF-8, not
    JSON or of another shape is a ``ReportError`` naming the file."""
    text = _read_text(path, what)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ReportError(f"{path}: unreadable {what} (not JSON: {str(err)[:120]})") from None
    return _expect(path, value, kind, f"its {what}")


# The fields of a metrics file the report reads, and their JSON types (None: may be null).
_METRICS_FIELDS = {"method": str, "agent": str, "benchmark": str, "runs": dict, "seeds": list,
                   "code_version": str, "aggregate": dict, "checkpoints": dict}
_RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")   # a directory under eval/, no "../"


def _check_metrics(path: pathlib.Path, metrics: dict) -> dict:
    """``metrics`` once every field the report reads has the type evaluate writes."""
    for field, kind in _METRICS_FIELDS.items():
        _expect(path, metrics.get(field), kind, f"field {field!r}", optional=True)
    for run in metrics.get("runs") or {}:
        if not _RUN_NAME.fullmatch(run):
            raise ReportError(f"{path}: run name {run!r} is not a run directory evaluate names")
    per_task = _expect(path, (metrics.get("aggregate") or {}).get("per_task"), dict,
                       "field 'aggregate.per_task'", optional=True) or {}
    for field in ("task_ids", "groups"):
        _expect(path, per_task.get(field), list, f"field 'aggregate.per_task.{field}'", True)
    return metrics


def _check_end(path: pathlib.Path, lineno: int, end: dict) -> dict:
    """A held-out task_end once the fields the report counts have their types."""
    where = f"line {lineno}: task_end's"
    if not isinstance(end.get("solved"), (bool, int)):
        _expect(path, end.get("solved"), bool, f"{where} 'solved'")
    for field in ("tokens", "cached_tokens", "calls"):
        value = end.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            _expect(path, value, int, f"{where} {field!r}")
    return end


def _task_ends(path: pathlib.Path, run: str, eval_ids: tuple) -> dict:
    """The last finished attempt of every held-out task of ``run`` (a redone task counts once)."""
    wanted, ends = set(eval_ids), {}
    if path.exists():
        raw = _read_bytes(path, "run log")
        for lineno, line in enumerate(raw.splitlines(), 1):
            try:
                e = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                continue  # a line cut by a crash (or damaged): its task was redone, or is missing
            if isinstance(e, dict) and e.get("event") == "task_end" and e.get("run") == run \
                    and isinstance(e.get("task_id"), str) and e["task_id"] in wanted:
                ends[e["task_id"]] = _check_end(path, lineno, e)
    missing = len(wanted) - len(ends)
    if missing:
        raise ReportError(f"{path}: run {run} has no result for {missing} of {len(wanted)} "
                          "held-out tasks (evaluation unfinished?)")
    return ends


def _read_bytes(path: pathlib.Path, what: str) -> bytes:
    """A workdir file's bytes; unreadable is a ``ReportError`` naming it."""
    try:
        return path.read_bytes()
    except OSError as err:
        raise ReportError(f"{path}: unreadable {what} ({err.strerror or err})") from None


def unreported_runs(workdir, runs) -> str | None:
    """Why the evaluation ``runs`` of ``workdir`` cannot be reported (a run whose log has no
    result for some held-out task, an unreadable split), None when each has every task."""
    root = pathlib.Path(workdir)
    try:
        eval_ids = tuple(_read_json(root / "splits.json", "splits.json").get("eval") or [])
        for run in runs:
            _task_ends(root / "eval" / run / "log.jsonl", run, eval_ids)
    except ReportError as err:
        return str(err)
    return None


def _recorded_groups(metrics: list, eval_ids: tuple) -> dict | None:
    """task id -> reference group of the held-out tasks, from the metrics files'
    ``aggregate.per_task`` (``task_ids`` and ``groups``, aligned); None when no file records
    groups (a workdir evaluated before they were written). A held-out task no file lists is its
    own group, as ``protocol.metrics.task_groups`` does."""
    recorded = {}
    for m in metrics:
        per_task = (m.get("aggregate") or {}).get("per_task") or {}
        ids, groups = per_task.get("task_ids"), per_task.get("groups")
        if ids and groups and len(ids) == len(groups):
            recorded.update(zip(ids, groups))
    if not recorded:
        return None
    return {t: str(recorded.get(t, f"task:{t}")) for t in eval_ids}


def _recorded_code_version(root: pathlib.Path, metrics: list, fingerprint: dict) -> str:
    """A code version the run dir recorded, if any: ``code_version`` in a metrics file or a
    fingerprint entry (the phases write it, ``provenance``), or ``code_version.txt``."""
    versions = {m["code_version"] for m in metrics if m.get("code_version")}
    versions |= {v["code_version"] for v in fingerprint.values()
                 if isinstance(v, dict) and v.get("code_version")}
    if (root / CODE_VERSION_FILE).exists():
        versions.add(_read_text(root / CODE_VERSION_FILE, CODE_VERSION_FILE).strip())
    return " / ".join(sorted(versions)) if versions else NOT_RECORDED


def _store_hash(root: pathlib.Path, method: str) -> str:
    """The frozen memory's recorded hash: CounterMem's store or the baseline's memory sidecar,
    once the frozen file beside it is found to match it (a truncated or edited store is a
    ``ReportError``: its runs no longer describe the store beside them). A workdir copied
    without its frozen file keeps the recorded hash: it still names what was evaluated.

    Pooling runs is refused when it differs, since runs over different stores are different arms.
    """
    from countermem_jax.method.memory.persistence import StoreFormatError, load_frozen
    if method == "countermem":
        frozen, path = root / "store_frozen.jsonl", root / "store_frozen.sha256"
    else:
        frozen = root / "baselines" / f"{method}_frozen.jsonl"
        path = root / "baselines" / f"{method}_frozen.jsonl.sha256"
    if not path.exists():
        return "none (no memory)"
    recorded = _read_text(path, "recorded store hash").strip()
    if not frozen.exists():
        return recorded
    try:
        if method == "countermem":
            load_frozen(frozen, expected_hash=recorded)
        else:
            from countermem_jax.baselines.memory import load_frozen_memory
            load_frozen_memory(frozen, method)
    except (StoreFormatError, OSError) as err:
        raise ReportError(f"{root}: its frozen store does not match the hash recorded when it "
                          f"was frozen ({' '.join(str(err).split())}); rebuild it in a new "
                          "workdir") from None
    return recorded


def _backbone(fields: dict) -> str:
    """The backbone identity as configured (kind, model, path, reasoning effort, context size).

    Read from the build fingerprint: the configuration is what the workdir can prove, the
    served weights behind a URL are not.
    """
    keys = ("kind", "model", "model_path", "reasoning_effort", "n_ctx")
    parts = [f"{k}={fields[f'backbone.{k}']}" for k in keys if fields.get(f"backbone.{k}")]
    return ", ".join(parts) + " (as configured)" if parts else NOT_RECORDED


def _arm_label(method: str, run: str) -> str:
    """The Table 1 row label of a run: the baseline's label, "CounterMem" for the trained DQN, or
    "CounterMem (<selector>)" for a fixed selector evaluated on the same store.
    """
    if method != "countermem":
        return METHOD_LABELS.get(method, method)
    if run.startswith("countermem-dqn-"):
        return "CounterMem"
    return f"CounterMem ({run.removeprefix('countermem-')})"


def _seed(ends: dict) -> str | None:
    """The selector seed(s) recorded in a run's task ends, or None when the run has none."""
    seeds = {e.get("seed") for e in ends.values()}
    return None if seeds == {None} else ",".join(sorted(str(s) for s in seeds))


def _check_checkpoints(files: list, metrics: list, selector_file: pathlib.Path,
                       selector: dict) -> None:
    """Refuses metrics whose evaluated checkpoint (``checkpoints``: step and fingerprint per
    seed) is not the one training records as that seed's best."""
    for path, m in zip(files, metrics):
        for seed, used in (m.get("checkpoints") or {}).items():
            recorded = selector.get(seed)
            if not isinstance(used, dict) or recorded is None:
                continue
            if (used.get("step"), used.get("fingerprint")) != (recorded.get("step"),
                                                               recorded.get("fingerprint")):
                raise ReportError(
                    f"{path}: seed {seed} was evaluated with the checkpoint of step "
                    f"{used.get('step')}, but {selector_file} records step "
                    f"{recorded.get('step')} as its best (fingerprint "
                    f"{str(recorded.get('fingerprint'))[:12]}); run evaluate again")


def load_workdir(path) -> tuple[list, Provenance]:
    """One workdir's arms (its base run included) and its provenance.

    Every run listed in the metrics files must have a result for every held-out task, or the
    workdir is refused as unfinished: a partial run would silently score on fewer tasks.
    Outcomes are read per task from each run's own log, not from the metrics summary, so every
    figure of the report is recomputed from per-task results. A workdir made before
    fingerprints still loads (its config fields show as not recorded); the splits hash covers
    only the task assignment, so manifests differing in bookkeeping fields hash alike.
    """
    try:
        check_utf8(path, "run directory")
    except NotUTF8 as err:
        raise ReportError(str(err)) from None
    root = pathlib.Path(path)
    if not root.is_dir():
        raise ReportError(f"{root}: not a directory")
    try:
        phase_locks.refuse_if_running(root, "the report")
    except phase_locks.WorkdirBusy as err:
        raise ReportError(str(err)) from None
    manifest = _read_json(root / "splits.json", "splits.json")
    for part in splits_lib.PARTS:
        _expect(root / "splits.json", manifest.get(part), list, f"part {part!r}", optional=True)
    fingerprint = _read_json(root / "fingerprint.json", "fingerprint.json") \
        if (root / "fingerprint.json").exists() else {}
    for phase, entry in fingerprint.items():
        _expect(root / "fingerprint.json", entry, dict, f"entry {phase!r}")
        _expect(root / "fingerprint.json", entry.get("fields"), dict,
                f"entry {phase!r}'s 'fields'", optional=True)
    files = sorted(root.glob("metrics*.json"))
    if not files:
        raise ReportError(f"{root}: no metrics.json; run evaluate on this workdir first")
    metrics = [_check_metrics(f, _read_json(f, "metrics file")) for f in files]
    eval_ids = tuple(manifest.get("eval") or [])
    if not all(isinstance(t, str) for t in eval_ids):
        raise ReportError(f"{root / 'splits.json'}: held-out task ids that are not strings")
    if not eval_ids:
        raise ReportError(f"{root / 'splits.json'}: no held-out (eval) task ids")
    kinds = {(m.get("method", "countermem"), m.get("agent"), m.get("benchmark")) for m in metrics}
    if len(kinds) != 1:
        raise ReportError(f"{root}: its metrics files disagree on method/agent/benchmark {kinds}")
    method, agent_kind, benchmark = kinds.pop()
    agent = AGENT_LABELS.get(agent_kind, str(agent_kind))
    ends = {}
    for m in metrics:
        for run in m.get("runs", {}):
            ends[run] = _task_ends(root / "eval" / run / "log.jsonl", run, eval_ids)
    if "base" not in ends:
        raise ReportError(f"{root}: no base run among {sorted(ends)}")
    build_fields = fingerprint.get("build_memory", {}).get("fields", {})
    backbone = _backbone(build_fields)
    groups = _recorded_groups(metrics, eval_ids)
    arms = {}
    for run, run_ends in ends.items():
        label = BASE_LABEL if run == "base" else _arm_label(method, run)
        arm = arms.setdefault(label, Arm(agent, label, "none" if run == "base" else method, [],
                                         backbone, str(benchmark)))
        arm.runs.append(Run(str(root), run, _seed(run_ends), run_ends,
                            None if run == "base" else ends["base"], groups))
    assignment = {n: list(manifest.get(n, [])) for n in splits_lib.PARTS}
    selector_file = root / "selector" / "fingerprints.json"
    selector = _read_json(selector_file, "selector fingerprints") if selector_file.exists() else {}
    for seed, entry in selector.items():
        _expect(selector_file, entry, dict, f"seed {seed!r}'s entry")
    _check_checkpoints(files, metrics, selector_file, selector)
    for best in sorted((root / "selector").glob("seed_*/best.json")):   # the learning curve's
        returns = _read_json(best, "selector best.json").get("val_returns")
        for step, value in (_expect(best, returns, dict, "field 'val_returns'", True) or {}).items():
            if not step.isdigit() or isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ReportError(f"{best}: field 'val_returns' holds {step!r}: {value!r}, "
                                  "expected decisions: a number")
    provenance = Provenance(
        workdir=str(root), method=method, agent=agent, benchmark=str(benchmark),
        eval_ids=eval_ids,
        splits_hash=hashlib.sha256(json.dumps(assignment, sort_keys=True).encode()).hexdigest(),
        config_fingerprints={p: v.get("sha256", NOT_RECORDED) for p, v in fingerprint.items()
                             if isinstance(v, dict)},
        seeds=sorted({str(s) for m in metrics for s in m.get("seeds", [])}),
        store_hash=_store_hash(root, method),
        selector_fingerprints={s: f"step {v.get('step')}: {v.get('fingerprint')}"
                               for s, v in selector.items()},
        code_version=_recorded_code_version(root, metrics, fingerprint),
        backbone=backbone, metrics_files=[f.name for f in files],
        reference_groups=len(set(groups.values())) if groups is not None else None)
    return list(arms.values()), provenance


def _first_differences(a: tuple, b: tuple, limit: int = 3) -> str:
    """How two task-id sets differ, with a few examples from each side."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    return (f"{len(only_a)} only in the first (e.g. {only_a[:limit]}), {len(only_b)} only in "
            f"the second (e.g. {only_b[:limit]})")


def check_comparable(provenances: list) -> None:
    """Refuses runs that would be compared or pooled on different tasks, stores or code."""
    by_comparison, by_arm = {}, {}
    for p in provenances:
        first = by_comparison.setdefault((p.backbone, p.agent, p.benchmark), p)
        if set(first.eval_ids) != set(p.eval_ids):  # outcomes are paired by task id
            raise ReportError(
                f"refusing to compare {first.workdir} and {p.workdir} ({p.agent}, {p.benchmark}): "
                f"their held-out splits differ ({_first_differences(first.eval_ids, p.eval_ids)})")
        if NOT_RECORDED not in (first.code_version, p.code_version) and \
                first.code_version != p.code_version:
            raise ReportError(f"refusing to compare {first.workdir} and {p.workdir}: code versions "
                              f"differ ({first.code_version} vs {p.code_version})")
        same = by_arm.setdefault((p.backbone, p.agent, p.benchmark, p.method), p)
        if same.store_hash != p.store_hash:
            raise ReportError(f"refusing to pool {same.workdir} and {p.workdir} ({p.method}, "
                              f"{p.agent}, {p.benchmark}): store hashes differ "
                              f"({same.store_hash[:16]} vs {p.store_hash[:16]})")


def _identity(root: pathlib.Path) -> tuple:
    """(the directory itself, the content of its metrics files): equal for one workdir given by
    two paths (a symlink, a bind mount) and for a copy of it (evaluate writes the workdir's own
    paths into its metrics files, so two evaluations never match)."""
    stat = root.stat()
    files = sorted(root.glob("metrics*.json"))
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + _read_bytes(file, "metrics file") + b"\0")
    return (stat.st_dev, stat.st_ino), digest.hexdigest() if files else None


def check_distinct(workdirs) -> None:
    """Refuses a workdir given twice, by path, symlink or a copy: its runs would be pooled as
    further runs of its arms (n doubled, the intervals too narrow)."""
    seen = {}
    for path in workdirs:
        root = pathlib.Path(path)
        if not root.is_dir():
            continue   # load_workdir says what it is
        place, content = _identity(root)
        for key, how in ((place, "the same directory"),
                         (content, "identical metrics files: a copy of one evaluation")):
            if key is None:
                continue
            if key in seen:
                raise ReportError(f"refusing to pool {seen[key]} and {path}: {how}; give each "
                                  "workdir once")
            seen[key] = path


def load_all(paths) -> tuple[list, list]:
    """Arms pooled over workdirs (same backbone, agent, benchmark and row label), and every
    workdir's provenance; one workdir given twice is refused (``check_distinct``)."""
    arms, provenances = {}, []
    check_distinct(paths)
    for path in paths:
        try:
            workdir_arms, provenance = load_workdir(path)
        except ReportError as err:
            err.workdir = str(path)   # which workdir to redo (the sweep names its runs)
            raise
        provenances.append(provenance)
        for arm in workdir_arms:
            key = (arm.backbone, arm.agent, arm.benchmark, arm.label)
            if key in arms:
                arms[key].runs.extend(arm.runs)
            else:
                arms[key] = arm
    check_comparable(provenances)
    return list(arms.values()), provenances
