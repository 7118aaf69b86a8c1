"""Fig. 4 (paper §6) from a four-domain study directory (schema "countermem-study-domains/1",
``countermem_jax.studies.grid``): per agent and variant, each panel's statistic with equal
domain weight (benchmarks averaged within a domain, then the four domains averaged, as Table 1
does), its 95% CI and the paired test against the full method.
"""
import json
import pathlib

import numpy as np

from countermem_jax.protocol import intervals
from countermem_jax.reporting import stats
from countermem_jax.reporting.load import AGENT_LABELS, ReportError

SCHEMA = "countermem-study-domains/1"
FOUR = "four-domain"
STATS = {"gain": "score gain over base (pp)", "calls_per_solved": "calls per solved task",
         "base_calls_per_solved": "base agent's calls per solved task",
         "changes_per_retrieved": "action changes per retrieved record",
         "harmful_per_retrieved": "harmful changes per retrieved record"}
_ALPHA = (1.0 - intervals.CONFIDENCE) / 2


def load_settings(record: dict) -> dict:
    """{(benchmark, agent): the setting's variant study.json} of the settings that ran."""
    out = {}
    for s in record["settings"]:
        if s["status"] != "ran":
            continue
        file = pathlib.Path(record["_dir"]) / s["dir"] / "study.json"
        try:
            out[(s["benchmark"], s["agent"])] = json.loads(file.read_text())
        except (OSError, ValueError) as err:
            raise ReportError(f"{file}: unreadable setting study.json ({err})") from None
    return out


def _groups(sub: dict) -> list | None:
    """The reference group of each of a setting's tasks (sorted ids), merged over its variants'
    recorded ``task_groups``; None where none is recorded (every task its own unit)."""
    tasks = sorted(next(iter(sub["variants"].values()))["per_task_counts"]["base"])
    return stats.shared_groups([v.get("task_groups") for v in sub["variants"].values()], tasks)


def _arrays(sub: dict, variant: str, groups: list | None = None):
    """(variant counts [units × 5] summed over seeds, number of seeds, base counts [units × 5],
    tasks per unit) from a setting's ``per_task_counts`` (fields ``runner.COUNT_FIELDS``); a
    unit is a reference group of ``groups`` (its tasks' counts summed), else a task."""
    counts = sub["variants"][variant]["per_task_counts"]
    tasks = sorted(counts["base"])
    seeds = [k for k in counts if k != "base"]
    mem = np.sum([[counts[s][t] for t in tasks] for s in seeds], axis=0, dtype=np.float64)
    base = np.array([counts["base"][t] + [0] * (5 - len(counts["base"][t])) for t in tasks],
                    np.float64)
    codes, n_units = intervals.group_codes(groups, len(tasks))
    if groups is not None:
        mem, base = (np.stack([np.bincount(codes, weights=a[:, j], minlength=n_units)
                               for j in range(a.shape[1])], axis=1) for a in (mem, base))
    return mem, len(seeds), base, np.bincount(codes, minlength=n_units).astype(np.float64)


def benchmark_stat(stat: str, mem, n_seeds: int, base, sizes, idx) -> np.ndarray:
    """``stat`` of one benchmark for each row of unit indices ``idx`` [resamples × units]
    (``sizes``: tasks per unit)."""
    m, b = mem[idx].sum(axis=1), base[idx].sum(axis=1)    # [resamples × 5]
    n = sizes[idx].sum(axis=1)                             # tasks drawn per resample
    with np.errstate(divide="ignore", invalid="ignore"):
        if stat == "gain":
            return 100.0 * (m[:, 1] / (n * n_seeds) - b[:, 1] / n)
        if stat == "calls_per_solved":
            return np.where(m[:, 1] > 0, m[:, 0] / m[:, 1], np.nan)
        if stat == "base_calls_per_solved":
            return np.where(b[:, 1] > 0, b[:, 0] / b[:, 1], np.nan)
        col = {"changes_per_retrieved": 3, "harmful_per_retrieved": 4}[stat]
        return np.where(m[:, 2] > 0, m[:, col] / m[:, 2], np.nan)


def domain_weighted(per_benchmark: dict, domain_of: dict, domains) -> np.ndarray:
    """Equal domain weight: each domain the mean of its benchmarks' values, then the mean over
    ``domains``; ``per_benchmark`` maps a benchmark to its values (an array: point and
    replicates alike). Every domain must have a benchmark (the caller says which did not run)."""
    by_domain = [np.mean([per_benchmark[b] for b in per_benchmark if domain_of[b] == d], axis=0)
                 for d in domains]
    return np.mean(by_domain, axis=0)


def _interval(values: np.ndarray):
    """95% percentile interval of bootstrap replicates (undefined ones left out)."""
    values = values[np.isfinite(values)]
    if not values.size:
        return None, None
    lo, hi = np.quantile(values, [_ALPHA, 1 - _ALPHA])
    return float(lo), float(hi)


def _reason(status: str) -> str:
    """The short reason of a setting's status: "not run: data absent (amber: ...)" gives
    "data absent" (the details stay in the settings line)."""
    return status.removeprefix("not run: ").split(" (")[0]


def _domain_status(record: dict, agent: str) -> dict:
    """Per domain: "" when a benchmark of it ran for ``agent``, else why none did."""
    out = {}
    for d in record["domains"]:
        mine = [s for s in record["settings"] if s["domain"] == d and s["agent"] == agent]
        if any(s["status"] == "ran" for s in mine):
            out[d] = ""
        elif mine:
            out[d] = f"{d} not run: " + ", ".join(dict.fromkeys(_reason(s["status"]) for s in mine))
        else:
            out[d] = f"{d} not in the study"
    return out


def estimates(record: dict, subs: dict | None = None) -> list:
    """One dict per (panel, statistic, agent, variant, scope): the domain-weighted value (scope
    "four-domain") and each domain's, with 95% CI and, for the other variants, the paired
    difference to ``record["full"]`` with its CI and bootstrap p-value; ``status`` says why a
    value is undefined."""
    subs = load_settings(record) if subs is None else subs
    out = []
    for panel in record["panels"]:
        for stat in panel["stats"]:
            for agent in record["agents"]:
                out += _stat_rows(record, subs, panel, stat, agent)
    return out


def _stat_rows(record, subs, panel, stat, agent) -> list:
    benches = sorted(b for b, a in subs if a == agent)
    domain_of = {s["benchmark"]: s["domain"] for s in record["settings"]}
    status = _domain_status(record, agent)
    variants = list(record["variants"])
    if stat == "base_calls_per_solved":
        variants = variants[:1]   # the base agent is the same run under every variant
    # Per benchmark: the same resampled units (reference groups, else tasks) for every variant
    # (the paired test).
    idx, groups = {}, {b: _groups(subs[(b, agent)]) for b in benches}
    for i, b in enumerate(benches):
        n = len(subs[(b, agent)]["eval_task_ids"]) if groups[b] is None else len(set(groups[b]))
        rng = np.random.default_rng(intervals.BOOTSTRAP_SEED + i)
        idx[b] = np.vstack([np.arange(n)[None], rng.integers(0, n, (intervals.N_RESAMPLES, n))])
    values = {v: {b: benchmark_stat(stat, *_arrays(subs[(b, agent)], v, groups[b]), idx[b])
                  for b in benches} for v in variants}
    unit = ("task" if all(g is None for g in groups.values()) else "reference-group"
            if all(g is not None for g in groups.values()) else "reference-group (else task)")
    label = AGENT_LABELS.get(agent, agent) + (f", {STATS[stat]}" if len(panel["stats"]) > 1
                                              else "")
    if stat == "base_calls_per_solved":
        label = f"{AGENT_LABELS.get(agent, agent)} base agent"
    rows = []
    for v in variants:
        scopes = [(FOUR, list(record["domains"]))] + [(d, [d]) for d in record["domains"]]
        for scope, domains in scopes:
            missing = [status[d] for d in domains if status[d]]
            row = {"study": record["study"], "panel": panel["panel"], "title": panel["title"],
                   "metric": stat, "ylabel": panel.get("unit", stat), "method": label,
                   "agent": agent, "variant": v, "scope": scope,
                   "x": ("base agent" if stat == "base_calls_per_solved"
                         else record["variants"][v]),
                   "status": "; ".join(missing), "mean": None, "ci95_low": None,
                   "ci95_high": None, "diff_vs_full": None, "diff_ci95_low": None,
                   "diff_ci95_high": None, "p_vs_full": None, "std_over_runs": None,
                   "runs": 1, "units": "tasks",
                   "units_n": sum(len(subs[(b, agent)]["eval_task_ids"]) for b in benches
                                  if domain_of[b] in domains),
                   "estimate_method": f"equal domain weight; stratified {unit} bootstrap, "
                                      f"{intervals.N_RESAMPLES} resamples"}
            row["few_tasks"] = row["units_n"] < 20
            if not missing:
                mine = {b: x for b, x in values[v].items() if domain_of[b] in domains}
                w = domain_weighted(mine, domain_of, domains)
                if np.isfinite(w[0]):
                    row.update(mean=float(w[0]), **dict(zip(("ci95_low", "ci95_high"),
                                                            _interval(w[1:]))))
                else:
                    row["status"] = "undefined (a benchmark with a zero denominator)"
                full = record["full"]
                if v != full and full in values and np.isfinite(w[0]):
                    f = domain_weighted({b: x for b, x in values[full].items()
                                         if domain_of[b] in domains}, domain_of, domains)
                    d = w - f
                    if np.isfinite(d[0]):
                        reps = d[1:][np.isfinite(d[1:])]
                        p = min(1.0, 2.0 * min(float(np.mean(reps <= 0)),
                                               float(np.mean(reps >= 0)))) if reps.size else None
                        lo, hi = _interval(d[1:])
                        row.update(diff_vs_full=float(d[0]), diff_ci95_low=lo,
                                   diff_ci95_high=hi, p_vs_full=p)
            rows.append(row)
    return rows


def rows(record: dict) -> list:
    """The report's rows (``reporting.studies.rows`` layout plus scope, status and the paired
    test against the full method)."""
    return estimates(record)


def differences(record: dict, est: list | None = None) -> list:
    """The paired tests against the full method of the four-domain values (B = variant,
    A = full method), in ``reporting.studies.differences``' layout."""
    full = record["variants"][record["full"]]
    return [{"study": record["study"], "panel": r["panel"], "metric": r["metric"],
             "x": r["method"], "method_a": full, "method_b": r["x"], "tasks": r["units_n"],
             "difference_b_minus_a": r["diff_vs_full"], "ci95_low": r["diff_ci95_low"],
             "ci95_high": r["diff_ci95_high"], "tasks_b_better": None, "tasks_a_better": None,
             "p_bootstrap": r["p_vs_full"], "p_sign_test": None,
             "few_tasks": r["few_tasks"]}
            for r in (est if est is not None else estimates(record))
            if r["scope"] == FOUR and r["variant"] != record["full"]
            and r["metric"] != "base_calls_per_solved"]


def _fmt(mean, lo, hi, signed=False) -> str:
    if mean is None:
        return "—"
    s = "+" if signed else ""
    if lo is None:
        return f"{mean:{s}.2f}"
    return f"{mean:{s}.2f} [{lo:{s}.2f}, {hi:{s}.2f}]"


def _domain_cell(row: dict) -> str:
    """A domain's value, "not run" when none of its benchmarks ran, "n/a" when undefined."""
    if row["mean"] is not None:
        return _fmt(row["mean"], None, None)
    return "n/a" if row["status"].startswith("undefined") else "not run"


def table(record: dict, est: list | None = None) -> str:
    """The printed table: per panel, statistic, agent and variant, the four-domain value [95% CI],
    the paired difference to the full method [95% CI] with p, and each domain's value (or why
    it is missing)."""
    est = estimates(record) if est is None else est
    domains = record["domains"]
    lines = [f"{record['title']} ({record['paper']}): equal domain weight over "
             f"{', '.join(domains)}; settings: " + ", ".join(
                 f"{s['benchmark']}/{s['agent']}" + ("" if s["status"] == "ran"
                                                     else f" ({s['status']})")
                 for s in record["settings"])]
    lines += list(dict.fromkeys(r["status"] for r in est if r["scope"] == FOUR
                                and r["status"] and not r["status"].startswith("undefined")))
    by_key = {}
    for r in est:
        by_key.setdefault((r["panel"], r["metric"], r["agent"], r["variant"]), {})[r["scope"]] = r
    current = None
    for (panel, metric, agent, variant), scopes in by_key.items():
        if (panel, metric, agent) != current:
            current = (panel, metric, agent)
            lines += ["", f"({panel}) {STATS[metric]}, {AGENT_LABELS.get(agent, agent)}",
                      f"{'variant':<20}{'four-domain [95% CI]':>28}{'vs full [95% CI], p':>34}"
                      + "".join(f"{d:>14}" for d in domains)]
        four = scopes[FOUR]
        missing = [d for d in domains if _domain_cell(scopes[d]) == "not run"]
        cell = (_fmt(four["mean"], four["ci95_low"], four["ci95_high"], metric == "gain")
                if four["mean"] is not None else
                f"none ({', '.join(missing)} not run)" if missing else four["status"] or "—")
        diff = ("" if four["diff_vs_full"] is None else
                _fmt(four["diff_vs_full"], four["diff_ci95_low"], four["diff_ci95_high"], True)
                + f", p={four['p_vs_full']:.3f}")
        lines.append(f"{four['x'][:19]:<20}{cell:>28}{diff:>34}" + "".join(
            f"{_domain_cell(scopes[d]):>14}" for d in domains))
    return "\n".join(lines)
