"""Runs a study: every variant's three phases into ``DIR/<variant>/``, then ``DIR/study.json``."""
import dataclasses
import hashlib
import importlib
import json
import pathlib
import shutil

import ml_collections
import numpy as np

from countermem_jax.phases import config_fingerprint, config_validation
from countermem_jax import experiment
from countermem_jax.protocol import intervals, metrics, provenance
from countermem_jax.method.memory import load_frozen
from countermem_jax.runtime.runlog import EventBuffer, RunLog
from countermem_jax.reporting.studies import value_at
from countermem_jax.studies import SCHEMA, cells

EVALUATION_FILE = "evaluation.json"
# The per-task counts of study.json's ``per_task_counts``, in this order.
COUNT_FIELDS = ("calls", "solved", "retrieved_records", "action_changes", "harmful_changes")
STUDY_FILE = "study.json"
# Config sections that decide the memory-free base run: equal sections, identical base run.
_BASE_RUN_SECTIONS = ("data", "splits", "agent", "backbone")
# What build_memory leaves in a workdir (besides its fingerprint entry and log events).
_BUILD_FILES = ("store.jsonl", "store_frozen.jsonl", "store_frozen.sha256", "splits.json")


# ----------------------------------------------------------------------------- variant configs
def _flatten(tree: dict, prefix: str = "") -> dict:
    """A nested dict as ``{dotted path: leaf value}``."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def variant_configs(study) -> dict[str, ml_collections.ConfigDict]:
    """Each variant's run config: ``study.base`` with the variant's overrides, locked and
    validated (a bad override is refused in one line before anything runs)."""
    if not study.get("variants"):
        raise config_validation.ConfigError("bad study config: no variants")
    out = {}
    for name, variant in study.variants.items():
        cfg = ml_collections.ConfigDict(study.base.to_dict())
        config_validation.apply_overrides(cfg, variant.get("overrides"),
                                          f"bad study config: variant {name}")
        cfg.lock()
        config_validation.validate(cfg)
        out[name] = cfg
    reference = study.get("reference", "")
    if reference and reference not in out:
        raise config_validation.ConfigError(
            f"bad study config: reference={reference!r} is not a variant ({', '.join(out)})")
    return out


def overrides(variant) -> dict:
    """The variant's overrides as {dotted path: value}."""
    tree = variant.get("overrides") or {}
    return _flatten(tree.to_dict() if hasattr(tree, "to_dict") else dict(tree))


def _digest(fields: dict) -> str:
    """A stable hash of JSON-able fields (key order does not matter)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class ShareKeys:
    """What a variant can take from an earlier one: equal keys mean identical results."""
    build: str
    selector: str
    base_run: str

    @staticmethod
    def of(cfg) -> "ShareKeys":
        """The keys of one variant config: its build_memory fingerprint fields, those plus its
        train_selector fields (a selector depends on its memory), and the build fields of the
        base-run sections only."""
        build = config_fingerprint.fingerprint_fields(cfg, "build_memory")
        train = config_fingerprint.fingerprint_fields(cfg, "train_selector")
        base = {k: v for k, v in build.items() if k.split(".")[0] in _BASE_RUN_SECTIONS}
        return ShareKeys(_digest(build), _digest([build, train]), _digest(base))


# ----------------------------------------------------------------------------- copying
def _copy_log_events(src: pathlib.Path, dst: pathlib.Path, phase: str) -> None:
    """Appends the ``phase`` events of ``src/log.jsonl`` to ``dst/log.jsonl`` in one durable
    write (read whole: a cut line of ``src`` is left out; a cut copy reads as absent)."""
    copied = EventBuffer()
    for e in RunLog(src / "log.jsonl").events():
        if e.get("phase") == phase:
            copied.write(e.pop("event"), **e)
    RunLog(dst / "log.jsonl").write_all(copied)


def copy_build(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Makes ``dst`` hold ``src``'s build_memory output (Modules I-II, §3.2-3.3): the stores,
    the split, the phase's fingerprint entry and its construction log events."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in _BUILD_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)
    config_fingerprint.copy_fingerprint(src, dst, "build_memory")
    _copy_log_events(src, dst, "construction")


def copy_selector(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Makes ``dst`` hold ``src``'s trained selector (Module III, Appendix C.3): checkpoints,
    the phase's fingerprint entry and its selector-training log events."""
    shutil.copytree(src / "selector", dst / "selector", dirs_exist_ok=True)
    config_fingerprint.copy_fingerprint(src, dst, "train_selector")
    _copy_log_events(src, dst, "selector_training")


def copy_base_run(src: pathlib.Path, dst: pathlib.Path) -> None:
    """The memory-free run, and the donor's LLM response cache (``backbone.cache_dir=auto``):
    identical requests get the identical reply with its original usage (``backbones/cache.py``),
    so a draft the donor already made costs no new call and the token counts are unchanged."""
    shutil.copytree(src / "eval" / "base", dst / "eval" / "base", dirs_exist_ok=True)
    if (src / "llm_cache").is_dir():
        shutil.copytree(src / "llm_cache", dst / "llm_cache", dirs_exist_ok=True)


# ----------------------------------------------------------------------------- running
@dataclasses.dataclass
class _Donors:
    """Per share key, the first variant directory that has the phase's output."""
    build: dict = dataclasses.field(default_factory=dict)      # key -> variant dir
    selector: dict = dataclasses.field(default_factory=dict)
    base_run: dict = dataclasses.field(default_factory=dict)


def _trained(wd: pathlib.Path) -> bool:
    """``wd`` holds a trained selector: the best checkpoints' fingerprints, recorded when
    training ends."""
    return (wd / "selector" / "fingerprints.json").exists()


def run_variant(name: str, cfg, root: pathlib.Path, donors: _Donors, phase_kwargs) -> dict:
    """The three phases of one variant, taking what an earlier variant already made."""
    wd, keys = root / name, ShareKeys.of(cfg)
    shared = {"build": None, "selector": None, "base_run": None}  # donor per copied phase
    # Each phase: copy from a donor if this variant lacks it, run it if still missing, then
    # offer this variant as a donor for later ones.
    if not (wd / "store_frozen.jsonl").exists() and keys.build in donors.build:
        copy_build(root / donors.build[keys.build], wd)
        shared["build"] = donors.build[keys.build]
    if not (wd / "store_frozen.jsonl").exists():
        experiment.build_memory(cfg, wd, **phase_kwargs())
    donors.build.setdefault(keys.build, name)
    if cfg.eval.selector == "dqn":
        if not _trained(wd) and keys.selector in donors.selector:
            copy_selector(root / donors.selector[keys.selector], wd)
            shared["selector"] = donors.selector[keys.selector]
        if not _trained(wd):
            experiment.train_selector(cfg, wd, **phase_kwargs())
        donors.selector.setdefault(keys.selector, name)
    if not (wd / "eval" / "base").exists() and keys.base_run in donors.base_run:
        copy_base_run(root / donors.base_run[keys.base_run], wd)
        shared["base_run"] = donors.base_run[keys.base_run]
    done = wd / EVALUATION_FILE
    if not done.exists():
        result = experiment.evaluate(cfg, wd, **phase_kwargs())
        done.write_text(json.dumps({"result": result, "shared_from": shared}, indent=1,
                                   default=str))
    donors.base_run.setdefault(keys.base_run, name)
    return json.loads(done.read_text())


PROTOCOL_STUDIES = "countermem_jax.studies.protocols"  # studies 5–9, each its own protocol
GRID_STUDIES = "countermem_jax.studies.grid"  # a variant study per benchmark and agent


def run_any(study, workdir, *, config_path: str = "") -> dict:
    """The binary's entry: a config with ``protocol`` goes to its protocol study, one with
    ``variants`` to ``run_study``."""
    if "protocol" in study:
        return importlib.import_module(PROTOCOL_STUDIES).run(study, workdir)
    if "grid" in study:  # several benchmarks and agents (§6 over Table 1's four domains)
        return importlib.import_module(GRID_STUDIES).run_grid(study, workdir,
                                                               config_path=config_path)
    return run_study(study, workdir, config_path=config_path)


def run_study(study, workdir, *, config_path: str = "", backbone_factory=None,
              benchmark=None) -> dict:
    """Runs every variant (finished phases are skipped) and writes ``DIR/study.json``.

    ``backbone_factory`` (a new backbone per phase) and ``benchmark`` are for tests with the
    scripted backbone; by default each phase makes its backbone from the config."""
    configs = variant_configs(study)
    root = pathlib.Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    donors = _Donors()

    def phase_kwargs():
        """Keyword arguments of one phase call: a fresh backbone per phase (tests)."""
        return {"backbone": backbone_factory() if backbone_factory else None,
                "benchmark": benchmark}
    # In config order: a variant can only take from the ones before it.
    evaluations = {name: run_variant(name, cfg, root, donors, phase_kwargs)
                   for name, cfg in configs.items()}
    summary = summarize_study(study, configs, evaluations, root, config_path)
    (root / STUDY_FILE).write_text(json.dumps(summary, indent=1, default=str))
    print(study_table(summary))
    print(f"study.json: {root / STUDY_FILE}")
    return summary


# ----------------------------------------------------------------------------- study.json
def _run_key(run: str) -> str:
    """evaluate's run names -> the seed keys of its aggregate ("fixed" for a fixed selector)."""
    return run.rsplit("seed", 1)[1] if "-dqn-seed" in run else "fixed"


def _run_ends(wd: pathlib.Path, run: str) -> list[dict]:
    """The ``task_end`` events of ``run``, one per task (the last one logged, after a resume)."""
    ends = {}
    for e in RunLog(wd / "eval" / run / "log.jsonl").events("task_end"):
        if e.get("run") == run:
            ends[e["task_id"]] = e
    return list(ends.values())


def _solved(ends: list[dict], task_ids: list[str]) -> list[float]:
    """100 or 0 per task of ``task_ids``, in that order (a missing task is a KeyError)."""
    by_id = {e["task_id"]: 100.0 * bool(e["solved"]) for e in ends}
    return [by_id[t] for t in task_ids]


@dataclasses.dataclass
class _VariantRuns:
    """One evaluated variant: its task ends and decisions per seed key and of the base run."""
    wd: pathlib.Path
    result: dict
    ends: dict
    decisions: dict
    base_ends: list
    base_decisions: list

    @staticmethod
    def load(wd: pathlib.Path, result: dict, eval_ids: set) -> "_VariantRuns":
        """Reads the runs of ``result`` (evaluate's return) from ``wd``'s logs, restricted to
        the held-out tasks ``eval_ids``."""
        ends, decisions = {}, {}
        for run in result["runs"]:
            if run == "base":
                continue
            log = RunLog(wd / "eval" / run / "log.jsonl")
            ends[_run_key(run)] = [e for e in _run_ends(wd, run) if e["task_id"] in eval_ids]
            decisions[_run_key(run)] = [d for d in log.completed_decisions(run)
                                        if d["task_id"] in eval_ids]
        base_log = RunLog(wd / "eval" / "base" / "log.jsonl")
        return _VariantRuns(wd, result, ends, decisions,
                            [e for e in _run_ends(wd, "base") if e["task_id"] in eval_ids],
                            [d for d in base_log.completed_decisions("base")
                             if d["task_id"] in eval_ids])

    def matrix(self, task_ids: list[str]) -> np.ndarray:
        """Solved (0/100) as [seed keys × tasks], the layout ``intervals.summarize`` takes."""
        return np.array([_solved(self.ends[k], task_ids) for k in self.ends])

    def counts(self, task_ids: list) -> dict:
        """Per seed key (and "base") and task: [evaluator calls, solved, retrieved records,
        action changes, harmful changes] (``COUNT_FIELDS``), the per-task numbers the report's
        four-domain ratios resample (Fig. 4(b,d))."""
        def by_task(decisions):
            out = {}
            for d in decisions:
                out.setdefault(d["task_id"], []).append(d)
            return out
        base = by_task(self.base_decisions)

        def per_task(ends, decisions, paired=True):
            mine = by_task(decisions)
            ends = {e["task_id"]: e for e in ends}
            out = {}
            for t in task_ids:
                # harmful changes: against the memory-free run's same decision (Fig. 5(d))
                m = metrics.run_metrics([ends[t]], mine.get(t, []),
                                        base.get(t, []) if paired else None)
                out[t] = [m["world_model_calls"], m["solved"]] + [
                    m.get(k) or 0 for k in COUNT_FIELDS[2:]]
            return out
        return {"base": per_task(self.base_ends, self.base_decisions, paired=False),
                **{k: per_task(self.ends[k], self.decisions[k]) for k in self.ends}}

    def metrics_on(self, task_ids: set) -> dict:
        """Mean over seeds of ``metrics.run_metrics`` restricted to ``task_ids``."""
        base = [d for d in self.base_decisions if d["task_id"] in task_ids]
        runs = [metrics.run_metrics([e for e in self.ends[k] if e["task_id"] in task_ids],
                                    [d for d in self.decisions[k] if d["task_id"] in task_ids],
                                    base) for k in self.ends]
        if not runs:
            return {}
        # the funnel summed over seeds (counts, not means), beside the seeds' mean metrics
        return {**metrics.mean_metrics(runs),
                **({"funnel": metrics.add_funnels([r.get("funnel") for r in runs])}
                   if any(r.get("funnel") for r in runs) else {})}


def look_alike_tasks(with_conditions: _VariantRuns, without: _VariantRuns) -> set:
    """Tasks on which the condition-free variant retrieved a record whose condition is false
    for the task: a record the variant with conditions kept out of the same task's retrieval
    (its logged ``excluded_condition``). Surface similarity brought the record up, a requirement
    of the correction fails: the look-alike case of Appendix E.3, read from the runs themselves."""
    false_for = {}
    for decisions in with_conditions.decisions.values():
        for d in decisions:
            false_for.setdefault(d["task_id"], set()).update(
                (d.get("memory") or {}).get("excluded_condition") or ())
    tasks = set()
    for decisions in without.decisions.values():
        for d in decisions:
            retrieved = {r["record_id"] for r in (d.get("memory") or {}).get("retrieved") or ()}
            if retrieved & false_for.get(d["task_id"], set()):
                tasks.add(d["task_id"])
    return tasks


def _store_info(wd: pathlib.Path, cfg) -> dict:
    """Hashes, record count, capacity and evictions of the variant's frozen store (evictions > 0:
    the capacity bound during construction; ``build_hash`` is equal for two runs that built the
    same records, wherever they ran)."""
    frozen = load_frozen(wd / "store_frozen.jsonl")
    return {"hash": frozen.content_hash(), "build_hash": frozen.build_hash(),
            "records": len(frozen),
            "capacity": cfg.memory.capacity, "retention": cfg.memory.retention,
            "evictions": frozen.evictions}


def summarize_study(study, configs: dict, evaluations: dict, root: pathlib.Path,
                    config_path: str = "") -> dict:
    """The ``study.json`` dict (schema in ``countermem_jax.studies``): per variant its score with
    95% CI over seeds and tasks, its paired change against the base agent and the reference,
    its per-task outcomes (for the report's paired tests) and its memory-use metrics (§4.4),
    with the provenance the report checks (code version, backbone, held-out task ids)."""
    first = next(iter(configs.values()))
    eval_ids = sorted(json.loads((root / next(iter(configs)) / "splits.json").read_text())
                      ["eval"])
    runs = {name: _VariantRuns.load(root / name, evaluations[name]["result"], set(eval_ids))
            for name in configs}
    # Every variant must have evaluated exactly the study's held-out split (§4.2).
    for name, r in runs.items():
        got = sorted(e["task_id"] for e in r.base_ends)
        if got != eval_ids:
            raise experiment.PhaseError(f"{root / name}: its evaluated tasks differ from the "
                                        "study's held-out split")
    reference = study.get("reference", "") or "base"  # a variant name, or the base agent
    variants = {}
    for name, cfg in configs.items():
        r, result = runs[name], evaluations[name]["result"]
        solved = r.matrix(eval_ids)
        # The tasks' reference groups as the evaluation recorded them: the intervals draw them
        # whole (twins sharing a gold query); None (tasks drawn) where none were recorded.
        groups = cells.reference_groups(result, eval_ids)
        base = np.array(_solved(r.base_ends, eval_ids))
        # The reference: the base agent per task, or the reference variant's mean over seeds.
        ref = base if reference == "base" else runs[reference].matrix(eval_ids).mean(axis=0)
        # score*: [seeds × tasks] of 0/100, minus the base or reference per task for the changes.
        entry = {
            "label": study.variants[name].get("label", name),
            "overrides": overrides(study.variants[name]),
            "workdir": str(r.wd),
            "shared_from": evaluations[name]["shared_from"],
            "store": _store_info(r.wd, cfg),
            "selector": cfg.eval.selector,
            "revision": cfg.memory.get("revision"),   # how a chosen record revised the draft
            "seeds": list(r.ends),
            "per_task": {"base": dict(zip(eval_ids, (int(v > 0) for v in base))),
                         **{k: dict(zip(eval_ids, (int(v > 0) for v in row)))
                            for k, row in zip(r.ends, solved)}},
            "score": intervals.summarize(solved, groups=groups),
            # paired differences: the score interval with the groups' design effect
            "score_vs_base": intervals.summarize_difference(solved - base[None], groups=groups),
            "score_change": intervals.summarize_difference(solved - ref[None], groups=groups),
            "metrics": r.metrics_on(set(eval_ids)),
            "base_metrics": metrics.run_metrics(r.base_ends, r.base_decisions),
            "paired": result["aggregate"]["paired"],
            "per_task_counts": r.counts(eval_ids),
        }
        if groups is not None:   # the report's paired tests draw the same groups
            entry["task_groups"] = dict(zip(eval_ids, groups))
        variants[name] = entry
    kinds = study.get("task_kinds")
    if kinds:  # condition removal: ordinary vs look-alike tasks (Appendix E.3)
        look_alike = look_alike_tasks(runs[kinds.with_conditions], runs[kinds.without_conditions])
        ordinary = set(eval_ids) - look_alike
        for name in configs:
            variants[name]["by_task_kind"] = {
                "ordinary": dict(runs[name].metrics_on(ordinary), n_tasks=len(ordinary)),
                "look_alike": dict(runs[name].metrics_on(look_alike), n_tasks=len(look_alike))}
    return {
        "schema": SCHEMA, "study": study.study, "title": study.get("title", study.study),
        "paper": study.get("paper", ""), "config": config_path,
        "command": f"python -m countermem_jax.study --config={config_path} --workdir={root}",
        "code_version": provenance.code_version(), "benchmark": first.data.benchmark,
        "agent": first.agent.kind,
        "backbone": first.backbone.get("model") or first.backbone.get("model_path")
        or first.backbone.kind,
        "eval_task_ids": eval_ids, "reference": reference, "variants": variants,
        "columns": [{"header": h, "value": k} for h, k in (study.get("columns") or ())],
        "figures": [dict(f) for f in (study.get("figures") or ())],
    }


# ----------------------------------------------------------------------------- printing
def _cell(value, signed: bool = False) -> str:
    """One table cell: "mean [lo, hi]" for a summary with a CI, a number, or "—" if undefined."""
    if value is None:
        return "—"
    if isinstance(value, dict) and "ci95" in value:
        lo, hi = value["ci95"]
        s = "+" if signed else ""
        return f"{value['mean']:{s}.1f} [{lo:{s}.1f}, {hi:{s}.1f}]"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def study_table(summary: dict) -> str:
    """One row per variant: score [95% CI], change vs the reference, and the study's columns."""
    # (header, dotted key into a variant's entry, signed): the score, its change, then the
    # study's own columns (e.g. a metric it is about).
    columns = [("score [95% CI]", "score", False),
               (f"vs {summary['reference']} (pp)", "score_change", True)]
    columns += [(c["header"], c["value"], False) for c in summary.get("columns", ())]
    head = f"{'variant':<24}" + "".join(f"{h:>24}" for h, _, _ in columns)
    lines = [f"{summary['title']} ({summary['paper']}): {summary['benchmark']}, "
             f"{summary['agent']}, {len(summary['eval_task_ids'])} held-out tasks", head,
             "-" * len(head)]
    for name, entry in summary["variants"].items():
        lines.append(f"{entry['label'][:23]:<24}" + "".join(
            f"{_cell(value_at(entry, key), signed):>24}" for _, key, signed in columns))
    return "\n".join(lines)
