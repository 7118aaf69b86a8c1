"""What studies 5–9 share: sub-workdirs ("cells") that run the three phases of Algorithm 1 on a
config variant and exact task lists, one backbone and response cache for the whole study, and the
study's ``study.json``.

A study directory holds one sub-workdir per cell (an ordinary workdir: splits.json,
fingerprint.json, store, selector, eval/<run>/, metrics.json, so the usual tools read it), the
shared LLM response cache ``llm_cache/`` (a prefix build over the same ordering therefore costs
no new LLM calls) and ``study.json``:

    {"schema": "countermem-study-rows/1", "study": name, "title": str, "paper": "§5.2 (a–c), Appendix D.3", "code_version": str,
     "splits_hash": sha256 of the study's split assignment, "eval_task_ids": [str],
     "benchmark": str, "agent": str, "backbone": str, "config": {the study config},
     "notes": [str],                   # allocation of a budget, kept look-alike targets, ...
     "workdirs": {cell: path},
     "rows": [{"panel": "a", "title": panel title, "metric": "score", "ylabel": str,
               "method": str, "x": number or label,
               "values": [[float]],    # runs (orderings, seeds) × units
               "runs": [str],          # one name per row of values
               "units": "tasks" | "retrieval opportunities" | "selected uses" | ...,
               "unit_ids": [str] | null,     # task ids when units are tasks (paired tests)
               "unit_groups": [str],         # optional: each unit's reference group
               "tasks_behind": int,          # optional: held-out tasks behind a per-run value
               "estimate": {"mean", "ci95", "method"}}]}   # instead of values, for a ratio
                                                            # or a weighted summary (estimates)

``countermem_jax.reporting.studies`` turns every row into a mean with a 95% bootstrap CI (over runs
and units, ``intervals``; units drawn by reference group where ``unit_groups`` is recorded, read
from the cell's evaluation by ``reference_groups``), every pair of methods at the same panel, metric
and x with shared ``unit_ids`` into a paired test, and each study into one figure in the paper's
panel layout.
"""
import contextlib
import hashlib
import json
import pathlib
import shutil

import ml_collections

from countermem_jax.protocol import metrics, provenance
from countermem_jax.phases import config_fingerprint, config_validation
from countermem_jax import domains, experiment
from countermem_jax.protocol import splits as splits_lib
from countermem_jax.backbones.base import TokenLedger
from countermem_jax.backbones.factory import make_backbone

STUDY_FILE = "study.json"
SCHEMA = "countermem-study-rows/1"  # the variant studies' schema is countermem-study/1
MEMORY_PURPOSES = ("REVISE_WITH_RECORD", "REVISE_WITH_MEMORY", "CONDITION_JUDGE")


class StudyError(config_validation.ConfigError):
    """A study cannot run with this config or data (the binaries print one line, no traceback)."""


def phase_config(cfg, **overrides) -> ml_collections.ConfigDict:
    """The config a cell's phases run with: the run config ``cfg`` (a study config's ``base``)
    copied, with dotted ``overrides`` (``{"splits.manifest": path, "method": "reasoningbank"}``)
    applied."""
    out = ml_collections.ConfigDict(cfg.to_dict())
    out.update_from_flattened_dict(overrides)
    return out


def setting_config(cfg, benchmark: str, settings, **overrides) -> ml_collections.ConfigDict:
    """A cell's config for another of the paper's settings: the study's config with
    ``data.benchmark`` and that setting's split sizes and data fields (``settings[benchmark]``,
    a study config's ``settings``: {splits, data}, Appendix D.1), then ``overrides``; the study's
    own benchmark keeps the study's sizes."""
    setting = {}
    if benchmark != cfg.data.benchmark:
        if benchmark not in (settings or {}):
            raise StudyError(f"bad study config: settings has no paper setting {benchmark!r}")
        sizes, data = settings[benchmark].splits, settings[benchmark].data
        setting = {f"splits.{k}": v for k, v in sizes.items()}
        setting.update({f"data.{k}": v for k, v in data.items()})
    return phase_config(cfg, **{"data.benchmark": benchmark, **setting, **overrides})


def ids(tasks) -> list:
    """The task ids of ``tasks``, in order (a manifest's task list)."""
    return [t.task_id for t in tasks]


def splits_hash(manifest: dict) -> str:
    """A hash of the task-to-split assignment (build / train / validation / eval, §4.2): the
    report refuses to pool two records of a study whose hashes differ."""
    assignment = {n: list(manifest.get(n, [])) for n in splits_lib.PARTS}
    return hashlib.sha256(json.dumps(assignment, sort_keys=True).encode()).hexdigest()


class Study:
    """One study directory: the shared backbone and cache, its cells and its study.json.
    ``study_cfg`` is the study config: ``study`` (its name), ``base`` (the run config every cell
    starts from) and ``protocol`` (the study's own parameters)."""

    def __init__(self, study_cfg, workdir, backbone=None, benchmark=None):
        self.name, self.study_cfg = study_cfg.study, study_cfg
        self.cfg, self.params = study_cfg.base, study_cfg.protocol
        cfg = self.cfg
        self.root = pathlib.Path(workdir)
        self.root.mkdir(parents=True, exist_ok=True)
        self._injected = benchmark   # tests: (tasks, evaluator, domain) for every cell
        self._loaded: dict = {}
        if backbone is None:  # one backbone and one response cache for every cell
            backbone_cfg = ml_collections.ConfigDict(cfg.backbone.to_dict())
            if backbone_cfg.get("cache_dir") == "auto":
                backbone_cfg.cache_dir = str(self.root / "llm_cache")
            backbone = make_backbone(backbone_cfg, TokenLedger())
        self.backbone = backbone
        self.workdirs: dict[str, str] = {}

    def benchmark_for(self, cfg):
        """(tasks, evaluator, domain) of ``cfg``'s benchmark, loaded once per study."""
        if self._injected is not None:
            return self._injected
        name = cfg.data.benchmark
        if name not in self._loaded:
            self._loaded[name] = domains.load_benchmark(cfg.data)
        return self._loaded[name]

    @property
    def tasks(self) -> list:
        """The tasks of the study's base benchmark."""
        return self.benchmark_for(self.cfg)[0]

    def cell(self, name: str) -> pathlib.Path:
        """The workdir of cell ``name`` under ``DIR/cells/`` (created), listed in study.json."""
        path = self.root / "cells" / name
        path.mkdir(parents=True, exist_ok=True)
        self.workdirs[name] = str(path)
        return path

    def manifest(self, cell: pathlib.Path, **parts) -> str:
        """Writes the cell's exact task lists (ids) and returns the manifest's path."""
        path = cell.parent / f"{cell.name}.manifest.json"
        path.write_text(json.dumps({p: list(parts.get(p, [])) for p in splits_lib.PARTS},
                                   indent=1))
        return str(path)

    def run_phases(self, cfg, cell: pathlib.Path, *, build=True, train=None,
                   evaluate=True) -> dict | None:
        """The phases on one cell (each resumes and skips finished work, so a re-run study
        redoes nothing); ``train`` defaults to whether the method has a trained selector."""
        kwargs = {"backbone": self.backbone, "benchmark": self.benchmark_for(cfg)}
        if build:
            with _quiet():
                experiment.build_memory(cfg, cell, **kwargs)
        if train is None:
            train = cfg.get("method", "countermem") == "countermem" and cfg.eval.selector == "dqn"
        if train and not (cell / "selector" / "fingerprints.json").exists():
            with _quiet():
                experiment.train_selector(cfg, cell, **kwargs)
        if not evaluate:
            return None
        with _quiet():
            return experiment.evaluate(cfg, cell, **kwargs)

    def evaluate_with_memory_tokens(self, cfg, cell: pathlib.Path) -> tuple[dict, int]:
        """(evaluate's result, tokens of the calls that put memory into the context: revisions
        with a record or memory block and condition judgements), measured on the ledger while
        the cell's memory runs went (a cached reply counts with its original usage) and kept in
        ``memory_tokens.json``. A memory run a kill left unfinished is redone whole, so the
        number is never that of a part of the tasks."""
        record = cell / "memory_tokens.json"
        if record.exists():
            return self.run_phases(cfg, cell, build=False, train=False), \
                json.loads(record.read_text())["tokens"]
        for run_dir in sorted((cell / "eval").glob("*")):
            if run_dir.name != "base":
                shutil.rmtree(run_dir)
        ledger = self.backbone.ledger.by_purpose
        before = {p: ledger[p].total for p in MEMORY_PURPOSES}
        result = self.run_phases(cfg, cell, build=False, train=False)
        spent = sum(ledger[p].total - before[p] for p in MEMORY_PURPOSES)
        record.write_text(json.dumps({"tokens": spent, "purposes": list(MEMORY_PURPOSES)}))
        return result, spent

    def write(self, *, title: str, paper: str, rows: list, manifest: dict,
              notes: list = ()) -> dict:
        """Writes ``DIR/study.json`` (rows schema) atomically with the study's provenance (code
        version, split hash, backbone, config, cell workdirs) and returns the record."""
        record = {"schema": SCHEMA, "study": self.name, "title": title, "paper": paper,
                  "code_version": provenance.code_version(), "splits_hash": splits_hash(manifest),
                  "eval_task_ids": sorted(manifest.get("eval", [])),
                  "benchmark": self.cfg.data.benchmark, "agent": self.cfg.agent.kind,
                  "backbone": getattr(self.backbone, "model_name", "?"),
                  "config": json.loads(json.dumps(self.study_cfg.to_dict(), default=str)),
                  "notes": list(notes), "workdirs": dict(self.workdirs), "rows": rows}
        tmp = self.root / f".{STUDY_FILE}.tmp"
        tmp.write_text(json.dumps(record, indent=1))
        tmp.replace(self.root / STUDY_FILE)
        return record


def share_memory(source: pathlib.Path, target: pathlib.Path, *, store: bool = True) -> None:
    """Gives ``target`` the trained selector of ``source`` (its checkpoints and train_selector's
    fingerprint, unchanged) and, with ``store``, also its frozen memory, so ``evaluate`` on
    ``target`` reads exactly those artefacts (verified by their recorded hashes)."""
    config_fingerprint.copy_fingerprint(source, target, "train_selector",
                                   *(("build_memory",) if store else ()))
    names = ["selector"] + (["store_frozen.jsonl", "store_frozen.sha256", "baselines"]
                            if store else [])
    for name in names:
        src, dst = source / name, target / name
        if dst.exists() or not src.exists():
            continue
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)


def task_ends(cell: pathlib.Path, run: str) -> dict:
    """task_id -> the last task_end of ``run`` in the cell's evaluation log."""
    ends = {}
    for e in experiment.Workdir(cell).run_log(run).events("task_end"):
        if e["run"] == run:
            ends[e["task_id"]] = e
    return ends


def read_splits(cell: pathlib.Path) -> dict:
    """The split assignment the cell's phases recorded (``splits.json``)."""
    return json.loads((cell / "splits.json").read_text())


def decisions(cell: pathlib.Path, run: str) -> list:
    """The completed ``decision`` events of ``run`` in the cell's evaluation logs."""
    return experiment.Workdir(cell).run_log(run).completed_decisions(run)


def memory_run(result: dict) -> str:
    """The one memory run of an evaluated cell (a study evaluates one seed or fixed selector)."""
    runs = [r for r in result["runs"] if r != "base"]
    if len(runs) != 1:
        raise StudyError(f"expected one memory run per cell, got {runs}; give the study one "
                         "selector seed (selector.seeds=(0,)) or a fixed eval.selector")
    return runs[0]


def reference_groups(result: dict | None, task_ids: list) -> list | None:
    """Each task's reference group (twins sharing a gold query share one), in the order of
    ``task_ids``, from an evaluated cell's result (``aggregate.per_task``, as in metrics.json);
    None where the evaluation recorded none, and the intervals then draw tasks. A task the
    record lacks is its own group."""
    per_task = ((result or {}).get("aggregate") or {}).get("per_task") or {}
    if not per_task.get("groups"):
        return None
    group_of = dict(zip(per_task["task_ids"], per_task["groups"]))
    return [str(group_of.get(t, f"task:{t}")) for t in task_ids]


def solved_row(ends: dict, task_ids: list) -> list:
    """Per task of ``task_ids``: 100 if its ``task_end`` says solved, else 0 (success, %)."""
    return [100.0 * bool(ends[t]["solved"]) for t in task_ids]


def rate_units(decision_events: list, base_events: list) -> dict:
    """Per-unit indicators of the transfer rates (Appendix D.4): one per retrieval opportunity
    (≥ 1 eligible record returned) and one per selected use paired with the memory-free run
    (``base_events``) at the same decision, 100 where it did worse there (Fig. 5(d))."""
    memory = [d for d in decision_events if d.get("memory")]
    used = [d for d in memory if d["memory"].get("record_id")]
    base = {(d["task_id"], d.get("decision")): d for d in base_events}
    worse = [metrics.worse_than_base(base_events, d, base) for d in used]
    return {"coverage": [100.0 * bool(d["memory"].get("covered")) for d in memory],
            "harmful": [100.0 * w for w in worse if w is not None]}


def row(panel: str, title: str, metric: str, ylabel: str, method: str, x, values: list,
        runs: list, units: str, unit_ids: list | None = None, tasks_behind: int = 0,
        unit_groups: list | None = None) -> dict:
    """One row of study.json; ``tasks_behind`` = the held-out tasks a per-run aggregate (units
    "orderings") rests on, for the report's fewer-than-20 mark; ``unit_groups`` = each unit's
    reference group (``reference_groups``), recorded only when known."""
    out = {"panel": panel, "title": title, "metric": metric, "ylabel": ylabel,
           "method": method, "x": x, "values": values, "runs": runs, "units": units,
           "unit_ids": unit_ids}
    if tasks_behind:
        out["tasks_behind"] = tasks_behind
    if unit_groups is not None:
        out["unit_groups"] = list(unit_groups)
    return out


@contextlib.contextmanager
def _quiet():
    """Phases print their tables; a study prints its own summary instead."""
    with contextlib.redirect_stdout(None):
        yield
