"""The replication over split seeds (beyond the paper; metrics of §4.4 and App. D.4): the frozen
CPU config run on R split seeds of the report pool, pooled into one table whose intervals
resample reference groups, not tasks.
"""
import json
import pathlib
import time

import ml_collections
import numpy as np
from scipy import stats

from countermem_jax import domains
from countermem_jax.phases import context
from countermem_jax.protocol import intervals, metrics, pools, provenance
from countermem_jax.reporting.load import AGENT_LABELS
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.studies import cells, runner
from evaluators import grouping

TITLE = "Replication over split seeds"
PAPER = "beyond the paper (issue 36); §4.4, App. D.4 metrics"
BASE = "react"                        # the memory-free base agent's key in the pooled table
WALL_FILE = "wall_time.json"          # seconds spent per seed, summed over resumed invocations
CONFIDENCE = 0.95
# Issue 36's goal for a CounterMem arm pooled over seeds (printed as met / not met).
GOAL = dict(min_difference=3.0, min_tasks=120, rescued_over_broken=2.0, changed_share=0.5)

# ----------------------------------------------------------------------------- config
def seed_study(study, split_seed: int) -> ml_collections.ConfigDict:
    """The variant study of one split seed: ``study.base`` on that seed, the main arms, and the
    ablations where ``protocol.ablation_seeds`` names the seed."""
    p = study.protocol
    variants = {**p.arms.to_dict(),
                **(p.ablations.to_dict() if split_seed in tuple(p.ablation_seeds) else {})}
    c = ml_collections.ConfigDict()
    c.study, c.title = f"replication_seed{split_seed}", f"{TITLE}: split seed {split_seed}"
    c.paper, c.reference = PAPER, ""
    c.base = ml_collections.ConfigDict(study.base.to_dict())
    c.base.splits.seed = split_seed
    c.base.lock()
    c.variants = ml_collections.ConfigDict(variants)
    c.columns = (("records", "store.records"), ("uses", "metrics.selected_uses"),
                 ("changed", "metrics.action_changes"), ("harmful", "metrics.harmful_uses"))
    if metrics.changed_by_construction(study.base.memory.get("revision")):
        c.columns = tuple(col for col in c.columns if col[0] != "changed")   # = uses
    return c


def check(study, tasks) -> dict:
    """Refuses, in one line and before any model is loaded, a protocol the data cannot hold:
    every seed's splits are drawn (``SplitError`` when the folds do not fit the pool) and every
    seed's variants validated. Returns {seed: its splits}."""
    p = study.protocol
    n = p.split_seeds
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise cells.StudyError(f"bad study config: protocol.split_seeds={n!r} must be an "
                               "integer >= 1")
    folds = study.base.splits.folds
    if folds and folds < n:
        raise cells.StudyError(f"bad study config: protocol.split_seeds={n} needs "
                               f"base.splits.folds >= {n} (one disjoint evaluation fold per "
                               "seed), or base.splits.folds=0 (independent draws)")
    unknown = [s for s in p.ablation_seeds if not 0 <= s < n]
    if unknown:
        raise cells.StudyError(f"bad study config: protocol.ablation_seeds names seed(s) "
                               f"{unknown} outside 0..{n - 1}")
    out = {}
    for r in range(n):
        runner.variant_configs(seed_study(study, r))   # validates every variant's config
        out[r] = context.draw_splits(seed_study(study, r).base, tasks)
    return out


# ----------------------------------------------------------------------------- running
def run(study, workdir, *, backbone=None, benchmark=None, backbone_factory=None) -> dict:
    """Runs every split seed's variant study (finished phases skipped) and writes the pooled
    ``DIR/study.json``; prints each seed's table, then the pooled one. ``backbone`` (one for
    every phase), ``backbone_factory`` (a new one per phase) and ``benchmark`` are for tests
    with the scripted backbone; by default each phase makes its backbone from the config."""
    root = pathlib.Path(workdir)
    benchmark = benchmark or domains.load_benchmark(study.base.data)
    splits = check(study, benchmark[0])
    root.mkdir(parents=True, exist_ok=True)
    factory = backbone_factory or ((lambda: backbone) if backbone is not None else None)
    wall = _read_wall(root)
    summaries = {}
    n = study.protocol.split_seeds
    for r in range(n):
        sub = seed_study(study, r)
        print(f"replication: split seed {r} ({r + 1} of {n}: {', '.join(sub.variants)}) -> "
              f"{root / f'seed{r}'}")
        start = time.monotonic()
        try:
            summaries[r] = runner.run_study(sub, root / f"seed{r}",
                                            config_path=_config_name(study),
                                            backbone_factory=factory, benchmark=benchmark)
        finally:   # an interrupted seed's time counts too: the wall time is of every attempt
            wall[str(r)] = wall.get(str(r), 0.0) + time.monotonic() - start
            (root / WALL_FILE).write_text(json.dumps(wall, indent=1))
    group_of = {t.task_id: reference_group(t) for t in benchmark[0]}
    pooled = pool(summaries, group_of, _labels(study))
    pooled["provenance"] = _provenance(study, summaries, splits, wall)
    record = _record(study, root, pooled, splits)
    tmp = root / f".{runner.STUDY_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=1, default=str))
    tmp.replace(root / runner.STUDY_FILE)
    print(table(pooled))
    print(f"study.json: {root / runner.STUDY_FILE}")
    return record


def reference_group(task) -> str:
    """The task's reference group as a short digest (``evaluators.grouping.group_id``): the unit
    the intervals resample, kept in study.json without the reference text itself."""
    return grouping.group_id(task)


def _config_name(study) -> str:
    """The config file and argument the study was made from (set by its ``get_config``)."""
    return study.get("config_file", "configs/studies/replication.py")


def _labels(study) -> dict:
    """Arm name -> label, the base agent first, then the main arms and the ablations."""
    p = study.protocol
    return {BASE: AGENT_LABELS.get(study.base.agent.kind, study.base.agent.kind),
            **{k: v.label for k, v in p.arms.items()},
            **{k: v.label for k, v in p.ablations.items()}}


def _read_wall(root: pathlib.Path) -> dict:
    """Seconds spent per seed by earlier invocations ({} on the first)."""
    path = root / WALL_FILE
    return json.loads(path.read_text()) if path.exists() else {}


# ----------------------------------------------------------------------------- pooling
def arm_outcomes(summaries: dict, arm: str, group_of: dict) -> dict:
    """The per-task outcomes of ``arm`` over the seeds that ran it, as parallel lists: split
    seed, task id, reference group, ReAct (0/100) and the arm (0–100: the mean over selector
    seeds), plus rescued / broken: the (split seed, task) units where that mean is above /
    below ReAct's (one count per task, whatever the number of selector seeds)."""
    out = {"seed": [], "task": [], "group": [], "base": [], "treated": [], "rescued": 0,
           "broken": 0}
    for r, summary in summaries.items():
        if arm not in summary["variants"] and arm != BASE:
            continue
        entry = summary["variants"][arm] if arm != BASE else next(
            iter(summary["variants"].values()))
        per_task = entry["per_task"]
        runs = [k for k in per_task if k != "base"] if arm != BASE else ["base"]
        for t in sorted(per_task["base"]):
            base = 100.0 * per_task["base"][t]
            mine = 100.0 * float(np.mean([per_task[k][t] for k in runs]))
            out["seed"].append(r)
            out["task"].append(t)
            out["group"].append(group_of[t])
            out["base"].append(base)
            out["treated"].append(mine)
            out["rescued"] += mine > base
            out["broken"] += mine < base
    return out


def _score(treated, groups) -> dict:
    """Mean of the per-task scores with its grouped 95% bootstrap CI."""
    mean, low, high = intervals.grouped_bootstrap(treated, groups, confidence=CONFIDENCE,
                                                  seed=intervals.BOOTSTRAP_SEED)
    return {"mean": mean, "ci95": [low, high]}


def _difference(base, treated, groups) -> dict:
    """Mean of treated − base with the 95% score interval and the groups' design effect."""
    mean, low, high = intervals.paired_score_interval(base, treated, groups,
                                                      confidence=CONFIDENCE)
    diff = (np.asarray(treated) - np.asarray(base)) / 100.0
    return {"mean": mean, "ci95": [low, high],
            "design_effect": round(float(intervals.design_effect(diff, groups)), 3)}


def memory_uses(entry: dict) -> dict:
    """Selected record uses of one evaluated variant, summed over its selector seeds, from its
    run logs' decisions on the held-out tasks: uses, harmful (worse than ReAct's run at the same
    decision, ``metrics.paired_harm``), changed the draft, changed it right, and the funnel
    (``metrics.funnel``) of every selector seed's run, summed."""
    wd, tasks = pathlib.Path(entry["workdir"]), set(entry["per_task"]["base"])
    base_log = wd / "eval" / "base" / "log.jsonl"
    base = ([d for d in RunLog(base_log).completed_decisions("base") if d["task_id"] in tasks]
            if base_log.exists() else None)
    funnels = []
    for log in sorted((wd / "eval").glob("*/log.jsonl")):
        run = log.parent.name
        if run == "base":
            continue
        runlog = RunLog(log)
        ends = list({e["task_id"]: e for e in runlog.events("task_end")
                     if e["run"] == run and e["task_id"] in tasks}.values())
        decisions = [d for d in runlog.completed_decisions(run) if d["task_id"] in tasks]
        funnels.append(metrics.funnel(ends, decisions, base))
    f = metrics.add_funnels(funnels)
    return {"uses": f.get("selected", 0), "harmful": f.get("harmful"),
            "changed": f.get("changed", 0), "changed_right": f.get("right", 0), "funnel": f}


def _arm_row(summaries: dict, arm: str, group_of: dict) -> dict | None:
    """One table row: the arm's score, its difference to ReAct, sign test, use counts and funnel
    over ``summaries`` (the seeds pooled, or one seed); None when no seed ran the arm."""
    o = arm_outcomes(summaries, arm, group_of)
    if not o["task"]:
        return None
    row = {"seeds": sorted(set(o["seed"])), "tasks": len(o["task"]),
           "groups": len(set(o["group"])), "score": _score(o["treated"], o["group"]),
           "units": [[s, t, g] for s, t, g in zip(o["seed"], o["task"], o["group"])],
           "per_task": o["treated"]}
    if arm == BASE:
        return row
    n = o["rescued"] + o["broken"]
    row.update(difference=_difference(o["base"], o["treated"], o["group"]),
               rescued=o["rescued"], broken=o["broken"],
               sign_test_p=float(stats.binomtest(o["rescued"], n, 0.5).pvalue) if n else None)
    counted = [memory_uses(summary["variants"][arm]) for summary in summaries.values()
               if arm in summary["variants"]]
    funnel = metrics.add_funnels([c["funnel"] for c in counted])
    row.update(uses=funnel.get("selected", 0), harmful=funnel.get("harmful"),
               changed=funnel.get("changed", 0), changed_right=funnel.get("right", 0),
               funnel=funnel)
    row["changed_by_construction"] = all(
        metrics.changed_by_construction(s["variants"][arm].get("revision"))
        for s in summaries.values() if arm in s["variants"])
    return row


def pool(summaries: dict, group_of: dict, labels: dict) -> dict:
    """The pooled table's numbers: per arm over every seed that ran it (``arms``) and per seed
    (``per_seed``); ``group_of`` maps a task id to its reference group."""
    arms, per_seed = {}, {}
    for arm, label in labels.items():
        row = _arm_row(summaries, arm, group_of)
        if row is not None:
            arms[arm] = {"label": label, **row}
    for r, summary in summaries.items():
        per_seed[str(r)] = {}
        for arm, label in labels.items():
            row = _arm_row({r: summary}, arm, group_of)
            if row is not None:
                per_seed[str(r)][arm] = {"label": label, **row}
    return {"arms": arms, "per_seed": per_seed,
            "method": f"score: percentile bootstrap over reference groups (a group under "
                      f"several split seeds is one unit), 10000 resamples, numpy seed "
                      f"{intervals.BOOTSTRAP_SEED}; difference: Tango score interval for paired "
                      f"proportions with a design effect for reference groups "
                      f"(protocol/intervals.py); sign test: exact binomial on the tasks rescued "
                      f"vs broken, one count per task (scipy.stats.binomtest)"}


def goal(row: dict) -> list[str]:
    """What of issue 36's goal a pooled CounterMem arm misses ([] when it is met)."""
    missed = []
    d = row["difference"]
    if d["mean"] < GOAL["min_difference"]:
        missed.append(f"difference {d['mean']:+.1f} < +{GOAL['min_difference']:.0f} pp")
    if d["ci95"][0] <= 0:
        missed.append(f"CI low {d['ci95'][0]:+.1f} <= 0")
    if row["tasks"] < GOAL["min_tasks"]:
        missed.append(f"{row['tasks']} < {GOAL['min_tasks']} tasks")
    if row["rescued"] < GOAL["rescued_over_broken"] * row["broken"] or not row["rescued"]:
        missed.append(f"rescued {row['rescued']} < 2 x broken {row['broken']}")
    if row.get("changed_by_construction"):
        missed.append(f"changed share not measured: every use changes its draft "
                      f"{metrics.BY_CONSTRUCTION}")
    elif not row["uses"] or row["changed"] < GOAL["changed_share"] * row["uses"]:
        missed.append(f"changed {row['changed']} of {row['uses']} uses < 50 %")
    return missed


# ----------------------------------------------------------------------------- study.json
def _provenance(study, summaries: dict, splits: dict, wall: dict) -> dict:
    """Config, pool, code version, backbone, and per seed its split hash, store hashes,
    selector checkpoint fingerprints and wall time."""
    seeds = {}
    for r, summary in summaries.items():
        stores, selectors = {}, {}
        for name, v in summary["variants"].items():
            stores[name] = v["store"]["hash"]
            prints = pathlib.Path(v["workdir"]) / "selector" / "fingerprints.json"
            if prints.exists():
                selectors[name] = {s: f"step {f.get('step')}: {f.get('fingerprint')}"
                                   for s, f in json.loads(prints.read_text()).items()}
        seeds[str(r)] = {"splits_hash": cells.splits_hash(splits[r].manifest()),
                         "sizes": splits[r].summary(), "store_hash": stores,
                         "selector_fingerprints": selectors,
                         "wall_time_s": round(wall.get(str(r), 0.0), 1)}
    data = study.base.data
    return {"config": _config_name(study), "code_version": provenance.code_version(),
            "backbone": (study.base.backbone.model or study.base.backbone.model_path
                         or study.base.backbone.cpu_model or study.base.backbone.kind),
            "databases": list(data.db_ids),
            "report_pool": [d for d in data.db_ids
                            if pools.pool_of(data.benchmark, d) == pools.REPORT],
            "pools_fixed_on": pools.FIXED_ON, "folds": study.base.splits.folds,
            "seeds": seeds, "wall_time_s": round(sum(wall.values()), 1)}


def _record(study, root: pathlib.Path, pooled: dict, splits: dict) -> dict:
    """``DIR/study.json`` in the rows schema: panel (a) the score, (b) the difference to ReAct,
    pooled and per seed, each an estimate with its grouped CI; ``pooled`` the table itself."""
    rows = []
    for x, arms in [("pooled", pooled["arms"])] + [
            (f"seed {r}", a) for r, a in pooled["per_seed"].items()]:
        for arm, row in arms.items():
            units = [u[1] for u in row["units"]]
            est = {"mean": row["score"]["mean"], "ci95": row["score"]["ci95"],
                   "method": pooled["method"]}
            rows.append({**cells.row("a", "score", "score", "score (0-100)", row["label"], x,
                                     None, [], "tasks", units, row["tasks"]), "estimate": est})
            if arm != BASE:
                est = {"mean": row["difference"]["mean"], "ci95": row["difference"]["ci95"],
                       "method": pooled["method"]}
                rows.append({**cells.row("b", "difference to ReAct", "difference",
                                         "score - ReAct (pp)", row["label"], x, None, [],
                                         "tasks", units, row["tasks"]), "estimate": est})
    manifests = {r: s.manifest() for r, s in splits.items()}
    return {"schema": cells.SCHEMA, "study": study.study, "title": TITLE, "paper": PAPER,
            "code_version": provenance.code_version(),
            "splits_hash": cells.splits_hash({p: [i for m in manifests.values() for i in m[p]]
                                              for p in ("build", "train", "validation", "eval")}),
            "eval_task_ids": sorted({u[1] for u in pooled["arms"][BASE]["units"]}),
            "benchmark": study.base.data.benchmark, "agent": study.base.agent.kind,
            "backbone": pooled["provenance"]["backbone"],
            "config": json.loads(json.dumps(study.to_dict(), default=str)),
            "notes": [f"{x}: {line}" for x, line in _notes(pooled)],
            "workdirs": {f"seed{r}": str(root / f"seed{r}") for r in splits},
            "rows": rows, "pooled": pooled}


def _notes(pooled: dict) -> list:
    """The report's notes: how the intervals were made, and the goal per CounterMem arm."""
    out = [("intervals", pooled["method"])]
    for arm, row in pooled["arms"].items():
        if arm != BASE:
            missed = goal(row)
            out.append((row["label"], "issue 36 goal met" if not missed else
                        "issue 36 goal not met: " + "; ".join(missed)))
    return out


# ----------------------------------------------------------------------------- printing
def _ci(value: dict, signed: bool = False) -> str:
    """``mean [low, high]`` of an interval, signed for differences."""
    s = "+" if signed else ""
    low, high = value["ci95"]
    return f"{value['mean']:{s}.1f} [{low:{s}.1f}, {high:{s}.1f}]"


# (header, width) of the table's columns after the arm's name (``_NAME`` wide).
_NAME = 50   # "  seed 0: test-time checks against the reference" fits
_COLUMNS = (("seeds", 6), ("tasks (groups)", 15), ("score [95% CI]", 22),
            ("vs ReAct (pp) [95% CI]", 24), ("sign p", 8), ("resc/brk", 10),
            ("harmful/uses", 14), ("changed/uses", 14), ("changed right", 14))
# harmful: worse than ReAct's run at the same decision (Fig. 5(d)), not the Eq. 6 label


def _line(name: str, row: dict) -> str:
    """One table line of an arm (the base agent has no difference, test or uses)."""
    values = [",".join(str(s) for s in row["seeds"]), f"{row['tasks']} ({row['groups']})",
              _ci(row["score"])]
    if "difference" in row:
        p = row["sign_test_p"]
        values += [_ci(row["difference"], True), "—" if p is None else f"{p:.3f}",
                   f"{row['rescued']}/{row['broken']}",
                   f"{'—' if row['harmful'] is None else row['harmful']}/{row['uses']}",
                   "by constr." if row.get("changed_by_construction")
                   else f"{row['changed']}/{row['uses']}", str(row["changed_right"])]
    return f"{name[:_NAME - 1]:<{_NAME}}" + "".join(
        f"{v:>{w}}" for v, (_, w) in zip(values, _COLUMNS))


def _minutes(seconds: float) -> str:
    """A wall time in minutes, or in seconds below one minute."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def table(pooled: dict) -> str:
    """The pooled table, the per-seed rows, issue 36's goal per CounterMem arm and the
    provenance lines."""
    head = f"{'arm':<{_NAME}}" + "".join(f"{h:>{w}}" for h, w in _COLUMNS)
    prov = pooled["provenance"]
    reported = f"{len(prov['report_pool'])} of {len(prov['databases'])} in the report pool"
    lines = [f"{TITLE}: {', '.join(prov['databases'])} ({reported}); {prov['backbone']}",
             head, "-" * len(head)]
    lines += [_line(row["label"], row) for row in pooled["arms"].values()]
    lines += ["funnel, pooled over split and selector seeds (decisions of the memory runs):"]
    lines += [f"  {row['label']}: {metrics.funnel_line(row['funnel'])}"
              for row in pooled["arms"].values() if row.get("funnel")]
    lines += ["per split seed:"]
    for r, arms in pooled["per_seed"].items():
        lines += [_line(f"  seed {r}: {row['label']}", row) for row in arms.values()]
    lines += [f"CI: {pooled['method']}"]
    if any(row.get("changed_by_construction") for row in pooled["arms"].values()):
        lines += [f"changed/uses \"by constr.\": {metrics.BY_CONSTRUCTION} (retrieval offers "
                  "only records whose replay changes the draft), not a finding"]
    lines += [f"{label}: {line}" for label, line in _notes(pooled)[1:]]
    lines += [f"config: {prov['config']}; code version {prov['code_version']}; report pool "
              f"fixed {prov['pools_fixed_on']}: {', '.join(prov['report_pool']) or 'none'}; "
              f"wall time {_minutes(prov['wall_time_s'])}"]
    for r, s in prov["seeds"].items():
        shared = {}   # one line per store: the arms sharing a build share its hash
        for arm, digest in s["store_hash"].items():
            shared.setdefault(digest, []).append(arm)
        stores = ", ".join(f"{d[:12]} ({', '.join(a)})" for d, a in shared.items())
        selectors = ", ".join(f"{k} {'; '.join(v.values())[:40]}"
                              for k, v in s["selector_fingerprints"].items()) or "none"
        lines.append(f"  seed {r}: splits {s['splits_hash'][:12]} {s['sizes']}; stores "
                     f"{stores}; selectors {selectors}; {_minutes(s['wall_time_s'])}")
    return "\n".join(lines)
