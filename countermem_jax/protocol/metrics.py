"""Metrics of paper §4.4 and Appendix D.6, each with its stated denominator, from a run log."""
import collections

import numpy as np

from countermem_jax.protocol import intervals
from countermem_jax.method.memory.record import normalize_action


def run_metrics(task_ends: list[dict], decisions: list[dict],
                base_decisions: list[dict] | None = None) -> dict:
    """The §4.4 / Appendix D.6 metrics of one run, from its ``task_end`` and ``decision`` events.

    Scores are 0–100 per benchmark; a domain's score is the unweighted mean of its benchmarks'
    (§4.4), not a pooled rate. Calls and failures per solved task are None when nothing was
    solved (the ratio is undefined, not zero). The memory block exists only for runs whose
    decisions logged retrieval: coverage is per retrieval opportunity, the harmful-use rate
    per *selected* record use (Appendix D.4), so a record retrieved and then skipped is never
    counted as harmful. With the memory-free run's decisions on the same tasks
    (``base_decisions``) it also gives the draft-paired harm of the selected uses (study 10).
    """
    n = len(task_ends)
    solved = sum(e["solved"] for e in task_ends)
    calls = sum(e["calls"] for e in task_ends)
    failures = sum(e["failures"] for e in task_ends)
    out = {
        "tasks": n, "solved": solved, "score": 100.0 * solved / n if n else 0.0,
        "tokens": sum(e["tokens"] for e in task_ends), "world_model_calls": calls,
        "failed_attempts": failures,
        "calls_per_solved": calls / solved if solved else None,
        "failures_per_solved": failures / solved if solved else None,
    }
    by_bench = collections.defaultdict(list)
    for e in task_ends:
        by_bench[(e.get("domain", "?"), e.get("benchmark", "?"))].append(e["solved"])
    out["score_by_benchmark"] = {f"{d}/{b}": 100.0 * sum(v) / len(v) for (d, b), v in by_bench.items()}
    domains = collections.defaultdict(list)
    for (d, _), v in by_bench.items():
        domains[d].append(100.0 * sum(v) / len(v))
    out["score_by_domain"] = {d: sum(v) / len(v) for d, v in domains.items()}
    # Decisions with a memory block are the retrieval opportunities of Appendix D.4.
    memory = [d["memory"] for d in decisions if d.get("memory")]
    if memory:
        opportunities = len(memory)
        covered = sum(bool(m.get("covered")) for m in memory)
        # Selected uses: the selector chose a record rather than skipping (the harmful-use denominator).
        used = [d for d in decisions if d.get("memory", {}).get("record_id")]
        harm = paired_harm(base_decisions, used) if base_decisions is not None else {
            "harmful_uses": None, "helpful_uses": None, "paired_uses": None,
            "unpaired_uses": None, "harmful_use_rate": None}
        labelled = sum(1 for d in used if (d.get("reuse") or {}).get("label") == -1)
        out.update({"retrieval_opportunities": opportunities,
                    "retrieval_coverage": covered / opportunities,
                    "stale_refusals": sum(len(m.get("excluded_stale") or ()) for m in memory),
                    "selected_uses": len(used), **harm,
                    "reuse_label_harmful": labelled,
                    "reuse_label_harmful_rate": labelled / len(used) if used else None,
                    "changed_by_memory": sum(bool(d.get("changed")) for d in used)})
        changed = [d for d in used if d.get("changed")]
        retrieved = sum(len(m.get("retrieved") or ()) for m in memory)
        harmful_changes = (None if base_decisions is None else
                           sum(worse_than_base(base_decisions, d) is True for d in changed))
        out.update({"retrieved_records": retrieved, "action_changes": len(changed),
                    "harmful_changes": harmful_changes,
                    "action_changes_per_retrieved": len(changed) / retrieved if retrieved else None,
                    "harmful_changes_per_retrieved":
                        harmful_changes / retrieved if retrieved and harmful_changes is not None
                        else None})
        out.update(changed_uses(used, base_decisions))
        if base_decisions is not None:
            out.update(draft_paired_harm(base_decisions, used))
        # condition verdicts per decision (memory_use: memory.conditions), summed over decisions
        # (none where no decision judged a condition, e.g. a baseline row: nothing to report)
        verdicts = [m["conditions"] for m in memory if m.get("conditions")]
        if verdicts:
            out["condition_verdicts"] = {k: sum(v.get(k, 0) for v in verdicts) for k in (
                "compatible", "incompatible", "undecided", "judged_by_llm", "judge_calls",
                "judge_tokens")}
            if any("no_place" in v for v in verdicts):   # revision=replay's place test
                out["condition_verdicts"]["no_place"] = sum(v.get("no_place", 0)
                                                            for v in verdicts)
        out["funnel"] = funnel(task_ends, decisions, base_decisions)
    return out


def _base_index(base_decisions) -> dict:
    """The memory-free run's decisions by (task id, decision index)."""
    return {(d["task_id"], d.get("decision")): d for d in base_decisions or ()}


def worse_than_base(base_decisions, use: dict, base: dict | None = None) -> bool | None:
    """Whether a selected use did worse (success first, then utility) than the memory-free run
    at the same decision of the same task (Fig. 5(d)); None where that run never reached it.
    ``base``: ``_base_index(base_decisions)``, given when judging many uses."""
    b = (base if base is not None else _base_index(base_decisions)).get(
        (use["task_id"], use.get("decision")))
    return None if b is None else _outcome_key(use) < _outcome_key(b)


def paired_harm(base_decisions: list[dict], used: list[dict]) -> dict:
    """Harmful and helpful uses against the memory-free run at the same decision (module
    docstring, Fig. 5(d)), over the uses so paired."""
    base = _base_index(base_decisions)
    harmful = helpful = paired_uses = 0
    for d in used:
        b = base.get((d["task_id"], d.get("decision")))
        if b is None:
            continue
        paired_uses += 1
        harmful += _outcome_key(d) < _outcome_key(b)
        helpful += _outcome_key(d) > _outcome_key(b)
    return {"harmful_uses": harmful, "helpful_uses": helpful, "paired_uses": paired_uses,
            "unpaired_uses": len(used) - paired_uses,
            "harmful_use_rate": harmful / paired_uses if paired_uses else None}


FUNNEL = (("decisions", "decisions"), ("failed_drafts", "failed drafts"),
          ("with_candidate", "with a candidate"),
          ("conditions_compatible", "conditions compatible"),
          ("conditions_incompatible", "incompatible"), ("conditions_undecided", "undecided"),
          ("no_place", "records with no place"), ("refuted_by_transfer", "refuted by transfer"),
          ("stale", "stale"), ("selected", "selected"), ("changed", "changed"),
          ("right", "right"), ("wrong", "wrong"), ("harmful", "harmful"))


def funnel(task_ends: list[dict], decisions: list[dict],
           base_decisions: list[dict] | None = None) -> dict:
    """Where memory is lost, from a memory run's decision events (``FUNNEL`` in order):
    decisions; failed drafts (the memory-free draft failed: the unchanged draft's own outcome,
    or the paired memory-free run's where its action there was that draft; ``draft_unknown``
    where neither tells); decisions with a candidate (≥ 1 record offered); distinct conditions
    judged compatible / incompatible / undecided, summed over decisions; records kept out
    because their edit had no place in the draft, refuted by transfer checks, or stale;
    decisions where a record was selected, changed the draft, was right / wrong (changed and
    not right); harmful uses (``harmful_uses``, None without the memory-free run); then the
    run's task tokens, checker (world-model) calls and the condition judge's calls and tokens."""
    base = _base_index(base_decisions)
    memory = [d for d in decisions if d.get("memory")]
    used = [d for d in memory if d["memory"].get("record_id")]
    failed = unknown = 0
    for d in decisions:
        b = base.get((d.get("task_id"), d.get("decision")))
        if not d.get("changed"):
            failed += not (d.get("outcome") or {}).get("success")
        elif b is not None and normalize_action(b.get("action", "")) == normalize_action(
                d.get("draft", "")):
            failed += not (b.get("outcome") or {}).get("success")
        else:
            unknown += 1
    verdicts = [m["memory"].get("conditions") or {} for m in memory]
    changed = changed_uses(used, base_decisions)
    harm = paired_harm(base_decisions, used)["harmful_uses"] if base_decisions is not None \
        else None

    def excluded(key):
        return sum(len(d["memory"].get(key) or ()) for d in memory)
    return {"decisions": len(decisions), "failed_drafts": failed, "draft_unknown": unknown,
            "with_candidate": sum(bool(d["memory"].get("covered")) for d in memory),
            **{f"conditions_{k}": sum(v.get(k, 0) for v in verdicts)
               for k in ("compatible", "incompatible", "undecided")},
            "no_place": excluded("excluded_no_place"),
            "refuted_by_transfer": excluded("excluded_transfer"),
            "stale": excluded("excluded_stale"), "selected": len(used),
            "changed": changed["uses_changed_draft"], "right": changed["uses_changed_right"],
            "wrong": changed["uses_changed_draft"] - changed["uses_changed_right"],
            "harmful": harm,
            "tokens": sum(int(e.get("tokens") or 0) for e in task_ends),
            "checker_calls": sum(int(e.get("calls") or 0) for e in task_ends),
            "judge_calls": sum(v.get("judge_calls", 0) for v in verdicts),
            "judge_tokens": sum(v.get("judge_tokens", 0) for v in verdicts)}


def add_funnels(funnels) -> dict:
    """The sum of funnels (selector seeds, split seeds); a harmful count unknown in any is
    unknown in the sum."""
    funnels = [f for f in funnels if f]
    if not funnels:
        return {}
    out = {}
    for key in funnels[0]:
        values = [f.get(key) for f in funnels]
        out[key] = None if any(v is None for v in values) else sum(values)
    return out


def funnel_line(f: dict) -> str:
    """The funnel as one line of ``label count`` steps."""
    steps = [f"{f[k] if f.get(k) is not None else '—'} {label}" for k, label in FUNNEL]
    if f.get("draft_unknown"):
        steps[1] += f" (+{f['draft_unknown']} unknown)"
    return (" > ".join(steps) + f"; {f['tokens']} tokens, {f['checker_calls']} checker calls, "
            f"{f['judge_calls']} judge calls")


def changed_uses(used: list[dict], base_decisions: list[dict] | None = None) -> dict:
    """The selected uses that changed their draft, those whose change was right, and those
    whose record had no place in the draft (docs/protocol.md, Metrics). With the memory-free run's
    decisions (``base_decisions``), a use at a decision where that run executed the same
    draft is judged against its outcome; otherwise by the use's reuse label."""
    base = {(d["task_id"], d.get("decision")): d for d in base_decisions or ()}
    changed = [d for d in used if d.get("changed")]
    right = 0
    for d in changed:
        b = base.get((d["task_id"], d.get("decision")))
        if b is not None and normalize_action(b.get("action", "")) == normalize_action(
                d.get("draft", "")):
            right += _outcome_key(d) > _outcome_key(b)
        else:
            right += (d.get("reuse") or {}).get("label") == 1
    return {"uses_changed_draft": len(changed), "uses_changed_right": right,
            "uses_no_place": sum((d.get("memory") or {}).get("revision") == "no_place"
                                 for d in used)}


# Under memory.revision=replay retrieval offers only records whose replay changes the draft
# (``edit_replay.record_fits``) and the revision makes that replay: every use changes its draft.
BY_CONSTRUCTION = "by construction under replay"


def changed_by_construction(revision: str | None) -> bool:
    """Whether "uses that changed the draft" is every use by construction (``revision``: the
    run's ``memory.revision``), so that the count is no finding."""
    return revision == "replay"


def _outcome_key(decision: dict) -> tuple:
    outcome = decision.get("outcome") or {}
    return bool(outcome.get("success")), float(outcome.get("utility") or 0.0)


def draft_paired_harm(base_decisions: list[dict], used: list[dict]) -> dict:
    """Study 10: each selected use judged against the paired draft's own outcome.

    The memory-free run executed the draft at the same decision of the same task; where that
    run's action there equals the draft the record revised (the two runs had the same history up
    to this decision, always true at the first decision), the use is *paired*: harmful if its
    outcome (success first, then utility) is worse than the draft's, helpful if better. Unlike
    the reuse label (Appendix B.3), this judges first-attempt uses too; uses whose history
    diverged from the memory-free run are left unpaired and counted apart."""
    base = {(d["task_id"], d.get("decision")): d for d in base_decisions}
    harmful = helpful = paired_uses = 0
    for d in used:
        b = base.get((d["task_id"], d.get("decision")))
        if b is None or normalize_action(b.get("action", "")) != normalize_action(d.get("draft", "")):
            continue
        paired_uses += 1
        harmful += _outcome_key(d) < _outcome_key(b)
        helpful += _outcome_key(d) > _outcome_key(b)
    return {"draft_paired_uses": paired_uses, "draft_unpaired_uses": len(used) - paired_uses,
            "harmful_vs_draft": harmful, "helpful_vs_draft": helpful,
            "harmful_vs_draft_rate": harmful / paired_uses if paired_uses else None}


def paired(base_ends: list[dict], mem_ends: list[dict]) -> dict:
    """Rescued / broken counts over the tasks both runs evaluated (Appendix E.3).

    Rescued: failed by the base agent and solved with memory; broken: the reverse; ``net`` is
    their difference. Tasks present in only one run are ignored rather than counted as failed.
    """
    base = {e["task_id"]: e["solved"] for e in base_ends}
    mem = {e["task_id"]: e["solved"] for e in mem_ends}
    common = sorted(set(base) & set(mem))
    rescued = sum(1 for t in common if mem[t] and not base[t])
    broken = sum(1 for t in common if base[t] and not mem[t])
    return {"paired_tasks": len(common), "rescued": rescued, "broken": broken,
            "net": rescued - broken}


def _aligned(base_ends: list[dict], seed_ends: dict) -> list[str]:
    """Sorted task ids of the base run; ``ValueError`` if a seed evaluated a different set.

    The paired difference per task is only meaningful when every seed saw the same tasks.
    """
    ids = sorted({e["task_id"] for e in base_ends})
    for seed, ends in seed_ends.items():
        if sorted(e["task_id"] for e in ends) != ids:
            raise ValueError(f"seed {seed}: its evaluated tasks differ from the base agent's")
    return ids


def task_groups(ids: list[str], group_of: dict | None) -> list[str] | None:
    """The reference group of each task id, in order (a task the map lacks is its own group);
    None without a map, which makes the bootstrap draw tasks."""
    if group_of is None:
        return None
    return [group_of.get(t, f"task:{t}") for t in ids]


def seed_aggregate(base_ends: list[dict], seed_ends: dict, seed_decisions: dict,
                   base_decisions: list[dict] | None = None,
                   group_of: dict | None = None) -> dict:
    """Per-seed metrics, their means, and mean/std/95% CI of the score and of the paired
    difference to the base agent (``intervals``); ``seed_ends`` maps seed -> task ends;
    ``base_decisions`` (the memory-free run's) adds the draft-paired harm; ``group_of`` (task id
    -> reference group) makes the intervals resample groups, and is recorded per task."""
    ids = _aligned(base_ends, seed_ends)
    groups = task_groups(ids, group_of)
    base = {e["task_id"]: 100.0 * e["solved"] for e in base_ends}
    per_seed = {str(s): run_metrics(ends, seed_decisions[s], base_decisions)
                for s, ends in seed_ends.items()}
    # Tasks × seeds matrix in a fixed task order, so seed rows line up with the base vector.
    solved = np.array([[100.0 * {e["task_id"]: e["solved"] for e in ends}[t] for t in ids]
                       for ends in seed_ends.values()])
    pairs = {str(s): paired(base_ends, ends) for s, ends in seed_ends.items()}
    return {
        "per_seed": per_seed,
        "mean": mean_metrics(list(per_seed.values())),
        "score": intervals.summarize(solved, groups=groups),
        "score_difference": intervals.summarize_difference(
            solved - np.array([base[t] for t in ids])[None], groups=groups),
        # the per-task outcomes the intervals were drawn from, for pooled summaries
        "per_task": {"task_ids": ids, "groups": groups, "base": [base[t] for t in ids],
                     "treated": solved.tolist()},
        "paired": pairs,
        "rescued": {s: p["rescued"] for s, p in pairs.items()},
        "broken": {s: p["broken"] for s, p in pairs.items()},
    }


def mean_metrics(runs: list[dict]) -> dict:
    """The mean over runs of every numeric metric (a ratio undefined in some run is left out of
    its mean; undefined everywhere gives None)."""
    out = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            continue
        values = [r.get(key) for r in runs if isinstance(r.get(key), (int, float))]
        out[key] = float(np.mean(values)) if values else None
    return out


# (reported name, task_end field); None means "count the task ends themselves".
_COST_KEYS = (("tasks", None), ("llm_calls", "llm_calls"), ("tokens", "tokens"),
              ("world_model_calls", "calls"), ("failed_attempts", "failures"),
              ("counterfactual_checks", "cf_checks"), ("counterfactual_tokens", "cf_tokens"),
              ("reference_empty_tasks", "cf_reference_empty"))


def cost(ends: list[dict]) -> dict:
    """Summed spending of task runs: LLM calls and tokens, world-model calls, failed attempts,
    counterfactual checks and their tokens, and the tasks whose checks met an empty reference
    result (nothing verified on them)."""
    return {name: (len(ends) if key is None else sum(int(e.get(key) or 0) for e in ends))
            for name, key in _COST_KEYS}


def building_cost(task_ends: list[dict], untasked: list[dict] = ()) -> dict:
    """What building CounterMem cost, per phase, from the main log's task ends (paper §4.4 and
    Appendix D.6 leave these out of the task-run figures; Appendix B.4 bounds construction).

    construction        the base agent with Modules I–III on the construction split: LLM calls
                        and tokens (counterfactual proposals and distillation included, also
                        shown apart), world-model calls and failed attempts (counterfactual
                        checks included, also counted apart);
    selector_training   the ε-greedy training episodes and the validation episodes of every
                        seed, per seed and in total.
    A task is counted once per run (its last finished attempt: a task redone after a kill is
    not counted twice, the unfinished attempt's spending is not in the log). ``untasked``: LLM
    spending of construction that belongs to no task (a baseline's work after the last task,
    e.g. ExpeL's final insight update: ``baseline_memory`` events without a task id), added to
    construction's calls and tokens.
    """
    last = {}
    for e in task_ends:
        # Later events win: a task restarted after a kill keeps only its finished attempt.
        last[(e.get("phase"), e.get("run"), e.get("seed"), e["task_id"])] = e
    ends = list(last.values())
    construction = [e for e in ends if e.get("phase") == "construction"]
    training = [e for e in ends if e.get("phase") == "selector_training"]
    seeds = sorted({e.get("seed") for e in training}, key=lambda s: (s is None, s))
    per_seed = {str(s): {"train": cost([e for e in training if e.get("seed") == s
                                         and not str(e.get("run")).startswith(VALIDATION)]),
                         "validation": cost([e for e in training if e.get("seed") == s and
                                              str(e.get("run")).startswith(VALIDATION)])}
                for s in seeds}
    built, total = cost(construction), cost(construction + training)
    for e in untasked:
        tokens = int(e.get("tokens") or 0)
        calls = int(e.get("llm_calls", 1 if tokens else 0) or 0)
        for block in (built, total):
            block["tokens"] += tokens
            block["llm_calls"] += calls
    return {"construction": built,
            "selector_training": {"total": cost(training), "per_seed": per_seed},
            "total": total}


VALIDATION = "validation"  # run-name prefix of selector validation episodes


def _fmt(v):
    """Table cell: '—' for undefined, integers without decimals, 3 or 1 decimals otherwise."""
    if v is None:
        return "—"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def _interval(summary: dict, signed: bool = False) -> str:
    """``mean [lo, hi]`` of an ``intervals.summarize`` result, signed for differences."""
    sign = "+" if signed else ""
    lo, hi = summary["ci95"]
    return f"{summary['mean']:{sign}.1f} [{lo:{sign}.1f}, {hi:{sign}.1f}]"


def comparison_table(result: dict, agent: str, method: str = "CounterMem") -> str:
    """Base agent vs CounterMem: means over seeds with 95% CIs, per-seed scores and
    rescued/broken, then the cost of building (see ``building_cost``)."""
    base, agg = result["base"], result["aggregate"]
    mem, seeds = agg["mean"], list(agg["per_seed"])
    mem_head = f"{agent}+{method}"
    head = f"{'metric':<30}{agent:>20}{mem_head:>26}"
    lines = [head, "-" * len(head)]
    base_ci = result["base_score"]
    lines.append(f"{'score (0-100) [95% CI]':<30}{_interval(base_ci):>20}"
                 f"{_interval(agg['score']):>26}")
    lines.append(f"{'score - base (pp) [95% CI]':<30}{'':>20}"
                 f"{_interval(agg['score_difference'], signed=True):>26}")
    std = agg["score"]["std"]
    lines.append(f"{'score std over seeds':<30}{'':>20}{_fmt(std):>26}")
    rows = [("solved / tasks", None), ("task-run tokens", "tokens"),
            ("world-model calls", "world_model_calls"),
            ("calls per solved task", "calls_per_solved"),
            ("failed attempts per solved", "failures_per_solved"),
            ("retrieval coverage", "retrieval_coverage"), ("selected record uses", "selected_uses"),
            ("  that changed the draft", "uses_changed_draft"),
            ("  whose change was right", "uses_changed_right"),
            ("harmful uses (vs no memory)", "harmful_uses"),   # Fig. 5(d): worse than the
            ("harmful use rate", "harmful_use_rate"),          # memory-free run's decision
            ("harmful vs the same draft", "harmful_vs_draft_rate"),   # study 10
            ("reuse label -1 (Eq. 6)", "reuse_label_harmful")]
    for label, key in rows:
        if key == "uses_changed_draft" and changed_by_construction(result.get("revision")):
            lines.append(f"{label:<30}{'':>20}  every use, {BY_CONSTRUCTION} (no finding)")
            continue
        if key is None:
            b, m = f"{base['solved']}/{base['tasks']}", f"{_fmt(mem['solved'])}/{base['tasks']}"
        else:
            b, m = _fmt(base.get(key)), _fmt(mem.get(key))
        lines.append(f"{label:<30}{b:>20}{m:>26}")
    runs = ("one run (no selector)" if method != "CounterMem" else
            "one run of the fixed selector" if seeds == ["fixed"] else
            f"mean over {len(seeds)} selector seed(s) ({', '.join(seeds)})")
    lines.append(f"{method}: {runs}; CI: {agg['score']['method']}; difference: "
                 f"{agg['score_difference']['method']}")
    for s in seeds:
        p = agg["paired"][s]
        label = f"seed {s}" if s != "fixed" else \
            "fixed selector" if method == "CounterMem" else method  # a baseline has no selector
        lines.append(f"  {label}: score {agg['per_seed'][s]['score']:.1f}, paired tasks "
                     f"{p['paired_tasks']}: rescued {p['rescued']}, broken {p['broken']}, "
                     f"net {p['net']:+d}")
        v = agg["per_seed"][s].get("condition_verdicts")
        if v:  # §4 / Appendix B.4: how the applicability conditions of offered records were judged
            lines.append(f"    conditions: {v['compatible']} compatible, {v['incompatible']} "
                         f"incompatible, {v['undecided']} undecided"
                         + (f", {v['no_place']} with no place for the edit" if "no_place" in v
                            else "")
                         + f" ({v['judge_calls']} judge calls, {v['judge_tokens']} tokens)")
        f = agg["per_seed"][s].get("funnel")
        if f:   # where memory is lost, decision by decision (``funnel``)
            lines.append(f"    funnel: {funnel_line(f)}")
        stale = agg["per_seed"][s].get("stale_refusals")
        if stale:   # records checked in a world that has changed since (docs/method.md)
            lines.append(f"    stale records refused {stale} times (checker version or "
                         "environment changed since verification)")
    lines += ["", building_table(result["cost_of_building"], result.get("evaluation_cost"))]
    return "\n".join(lines)


def building_table(cost: dict, evaluation: dict | None = None) -> str:
    """The "cost of building" block: construction, selector training (per seed), their total,
    and the evaluation cost of the CounterMem runs for comparison."""
    cols = [("tasks", "tasks"), ("LLM calls", "llm_calls"), ("tokens", "tokens"),
            ("WM calls", "world_model_calls"), ("failed", "failed_attempts"),
            ("CF checks", "counterfactual_checks"), ("CF tokens", "counterfactual_tokens")]
    head = f"{'cost of building':<30}" + "".join(f"{c:>11}" for c, _ in cols)
    lines = [head, "-" * len(head)]

    def row(label, c):
        lines.append(f"{label:<30}" + "".join(f"{c[k]:>11}" for _, k in cols))
    row("construction", cost["construction"])
    for s, parts in cost["selector_training"]["per_seed"].items():
        row(f"selector seed {s}: training", parts["train"])
        row(f"selector seed {s}: validation", parts["validation"])
    row("selector training (all seeds)", cost["selector_training"]["total"])
    row("total cost of building", cost["total"])
    if evaluation:
        for label, c in evaluation.items():
            row(f"evaluation: {label}", c)
    return "\n".join(lines)
