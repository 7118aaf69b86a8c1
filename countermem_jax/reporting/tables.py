"""The numbers behind every table and figure, computed once from the loaded arms."""
import csv
import itertools
import pathlib

import numpy as np

from countermem_jax.protocol import intervals
from countermem_jax.domains import registry
from countermem_jax.experiment import METHOD_LABELS
from countermem_jax.reporting import stats
from countermem_jax.reporting.load import AGENT_LABELS, BASE_LABEL

FEW_TASKS_MARK = "†"


def _label_order(label: str) -> tuple:
    """Sort key: base agent, then the baselines in the paper's order, then CounterMem rows."""
    order = [BASE_LABEL] + [v for k, v in METHOD_LABELS.items() if k not in ("none", "countermem")]
    if label in order:
        return (order.index(label), label)
    return (len(order) + (0 if label.startswith("CounterMem") else 1), label)


def _agent_order(agent: str) -> tuple:
    """Sort key following ``AGENT_LABELS`` (ReAct before Reflexion), unknown agents last."""
    agents = list(AGENT_LABELS.values())
    return (agents.index(agent) if agent in agents else len(agents), agent)


def sorted_arms(arms: list) -> list:
    """Arms in report order: backbone, agent, method (paper order), configured benchmark."""
    return sorted(arms, key=lambda a: (a.backbone, _agent_order(a.agent), _label_order(a.label),
                                       a.benchmark))


def paper_domain(benchmark: str, configured: str) -> str:
    """The paper domain (registry) of a task's benchmark, else of the configured benchmark."""
    for name in (benchmark, configured):
        if name in registry.BENCHMARKS:
            return registry.BENCHMARKS[name].paper_domain
    return "other"


def _columns(arm) -> dict:
    """Task ids per benchmark (the task_end's benchmark field) of an arm's held-out tasks."""
    out = {}
    for task_id, end in sorted(arm.runs[0].tasks.items()):
        out.setdefault(str(end.get("benchmark", "?")), []).append(task_id)
    return out


def _bootstrap_seeds(arms: list) -> dict:
    """One bootstrap seed per (configured, task) benchmark, the same in every table: the first
    gets ``intervals.BOOTSTRAP_SEED`` (a single benchmark's CI is the one evaluate prints), and
    different benchmarks are resampled independently when a domain combines them."""
    benches = sorted({(a.benchmark, b) for a in arms for b in _columns(a)})
    return {key: intervals.BOOTSTRAP_SEED + i for i, key in enumerate(benches)}


def task_groups(runs: list, ids: list) -> list | None:
    """The reference group of each task of ``ids`` (one key per task, in order) for a bootstrap
    over ``runs``, or None when no run's workdir recorded groups (the tasks are then resampled
    as their own groups); ``stats.shared_groups`` merges the groupings of pooled workdirs."""
    return stats.shared_groups([run.groups for run in runs], ids)


def resampled_unit(arms: list) -> str:
    """What the report's intervals resampled, in words: reference groups where the workdirs
    recorded them, tasks where none did, and which workdirs are which where it is mixed."""
    runs = [run for arm in arms for run in arm.runs]
    grouped = sorted({r.workdir for r in runs if r.groups is not None})
    plain = sorted({r.workdir for r in runs if r.groups is None})
    groups = ("reference groups (tasks sharing a gold query drawn together; groups from "
              "metrics.json `aggregate.per_task`)")
    tasks = "tasks (the metrics.json has no `aggregate.per_task`, so no reference groups)"
    if not plain:
        return groups
    if not grouped:
        return tasks
    names = lambda dirs: ", ".join(f"`{d}`" for d in dirs)
    return (f"{groups} in cells with runs of {names(grouped)}; {tasks} in cells with runs of "
            f"{names(plain)} only")


def _matrix(runs: list, ids: list, value) -> np.ndarray:
    """[runs, tasks] matrix of ``value(run, task_id)`` in the given task order."""
    return np.array([[float(value(run, t)) for t in ids] for run in runs])


def _solved(run, task_id) -> float:
    """A task's outcome on the score scale: 100 if solved, else 0."""
    return 100.0 * bool(run.tasks[task_id]["solved"])


def _interval_fields(summary: dict, prefix: str = "") -> dict:
    """``mean`` / ``ci95_low`` / ``ci95_high`` of a summary, with an optional prefix."""
    return {f"{prefix}mean": summary["mean"], f"{prefix}ci95_low": summary["ci95"][0],
            f"{prefix}ci95_high": summary["ci95"][1]}


def scores(arms: list) -> list:
    """One row per (arm, benchmark): score with 95% CI, spread over runs, and where it came from.

    Each benchmark uses its own bootstrap seed from ``_bootstrap_seeds``, so the same cell gets
    the same interval in every table.
    """
    rows, seeds = [], _bootstrap_seeds(arms)
    for arm in sorted_arms(arms):
        for bench, ids in sorted(_columns(arm).items()):
            s = stats.summarize(_matrix(arm.runs, ids, _solved), seeds[(arm.benchmark, bench)],
                                task_groups(arm.runs, ids))
            rows.append({"backbone": arm.backbone, "agent": arm.agent, "method": arm.label,
                         "benchmark": bench, "domain": paper_domain(bench, arm.benchmark),
                         "runs": len(arm.runs), "tasks": len(ids), **_interval_fields(s),
                         "std_over_runs": s["std"], "few_tasks": len(ids) < stats.MIN_TASKS,
                         "workdirs": " ".join(sorted({r.workdir for r in arm.runs}))})
    return rows


def cell(row: dict) -> str:
    """A main-table cell: ``mean [low, high]``, marked when it rests on few tasks."""
    mark = FEW_TASKS_MARK if row["few_tasks"] else ""
    return f"{row['mean']:.1f} [{row['ci95_low']:.1f}, {row['ci95_high']:.1f}]{mark}"


def main_table(score_rows: list) -> tuple[list, list]:
    """(header, rows): one row per backbone, agent and method, one column per benchmark."""
    benches = sorted({r["benchmark"] for r in score_rows})
    cells = {}
    for r in score_rows:
        cells.setdefault((r["backbone"], r["agent"], r["method"]), {})[r["benchmark"]] = cell(r)
    header = ["backbone", "agent", "method"] + benches
    return header, [[*key] + [row.get(b, "—") for b in benches] for key, row in cells.items()]


def _domain_order(domain: str) -> tuple:
    """Sort key: the four Table 1 domains first, then the other paper domains, then the rest."""
    known = list(registry.FOUR_DOMAINS) + [d for d in registry.PAPER_DOMAINS
                                           if d not in registry.FOUR_DOMAINS]
    return (known.index(domain) if domain in known else len(known), domain)


def domain_table(arms: list) -> tuple[list, list]:
    """(header, rows) in the paper's Table 1 layout: per backbone, agent and method, each paper
    domain's score (equal-weight mean of its benchmarks) and the task-run tokens (M), with 95%
    CIs from a stratified bootstrap: every benchmark is resampled on its own (its own seed, runs
    and reference groups, or tasks, as in ``intervals``) and the replicates are combined like the
    point estimate."""
    cells = {}  # (backbone, agent, method) -> [(domain, benchmark, score replicates, score,
    #             token replicates, tokens, few tasks)]
    seeds = _bootstrap_seeds(arms)
    for arm in sorted_arms(arms):
        for bench, ids in sorted(_columns(arm).items()):
            seed = seeds[(arm.benchmark, bench)]
            solved = _matrix(arm.runs, ids, _solved)
            tokens = _matrix(arm.runs, ids, lambda run, t: int(run.tasks[t].get("tokens") or 0))
            scale = len(ids) / 1e6  # mean tokens per task -> the benchmark's total, in millions
            groups = task_groups(arm.runs, ids)  # within this benchmark only (stratified)
            cells.setdefault((arm.backbone, arm.agent, arm.label), []).append((
                paper_domain(bench, arm.benchmark),
                intervals.bootstrap_means(solved, seed=seed, groups=groups), solved.mean(),
                intervals.bootstrap_means(tokens, seed=seed, groups=groups) * scale,
                tokens.mean() * scale, len(ids) < stats.MIN_TASKS))
    domains = sorted({c[0] for parts in cells.values() for c in parts}, key=_domain_order)
    alpha = (1 - intervals.CONFIDENCE) / 2

    def text(value, replicates, few, digits=1):
        """``value [low, high]`` from bootstrap replicates (percentile bounds, as ``intervals`` uses),
        marked when the cell rests on few tasks.
        """
        lo, hi = np.quantile(replicates, [alpha, 1 - alpha])
        mark = FEW_TASKS_MARK if few else ""
        return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]{mark}"
    rows = []
    for key, parts in cells.items():
        row = [*key]
        for domain in domains:
            mine = [c for c in parts if c[0] == domain]
            row.append(text(np.mean([c[2] for c in mine]), np.mean([c[1] for c in mine], axis=0),
                            any(c[5] for c in mine)) if mine else "—")
        row.append(text(sum(c[4] for c in parts), np.sum([c[3] for c in parts], axis=0),
                        any(c[5] for c in parts), digits=4))
        rows.append(row)
    return ["backbone", "agent", "method"] + domains + ["tokens (M)"], rows


def differences(arms: list) -> list:
    """Every pair of methods sharing backbone, agent and configured benchmark, compared per task.

    Only tasks both arms evaluated enter; each method's per-task outcome is averaged over its
    runs before the paired test (``stats.paired_test``), whose bootstrap draws the reference
    groups either arm's workdirs recorded (tasks where none did).
    """
    rows = []
    groups = itertools.groupby(sorted_arms(arms), key=lambda a: (a.backbone, a.agent))
    for (backbone, agent), members in groups:
        members = list(members)
        for a, b in itertools.combinations(members, 2):
            if a.benchmark != b.benchmark:  # checked comparable per configured benchmark
                continue
            cols_a, cols_b = _columns(a), _columns(b)
            for bench in sorted(set(cols_a) & set(cols_b)):
                ids = sorted(set(cols_a[bench]) & set(cols_b[bench]))
                test = stats.paired_test(_matrix(a.runs, ids, _solved).mean(axis=0),
                                         _matrix(b.runs, ids, _solved).mean(axis=0),
                                         task_groups(a.runs + b.runs, ids))
                rows.append({"backbone": backbone, "agent": agent, "benchmark": bench,
                             "method_a": a.label,
                             "method_b": b.label, "tasks": test["tasks"],
                             "difference_b_minus_a": test["difference"],
                             "ci95_low": test["ci95"][0], "ci95_high": test["ci95"][1],
                             "tasks_b_better": test["b_better"],
                             "tasks_a_better": test["a_better"],
                             "p_bootstrap": test["p_bootstrap"],
                             "p_sign_test": test["p_sign_test"],
                             "few_tasks": test["tasks"] < stats.MIN_TASKS})
    return rows


def rescued_broken(arms: list) -> list:
    """Rescued / broken counts per non-base arm and benchmark against its own base run (Appendix E.3).

    Each run is paired with the base run of the same workdir, so the pairs share tasks and
    splits; counts are averaged over runs, with a bootstrap CI over reference groups (tasks
    where the workdirs recorded none).
    """
    rows = []
    for arm in sorted_arms(arms):
        if arm.label == BASE_LABEL:
            continue
        for bench, ids in sorted(_columns(arm).items()):
            fields, groups = {}, task_groups(arm.runs, ids)
            for name, changed in (("rescued", lambda base, mem: mem and not base),
                                  ("broken", lambda base, mem: base and not mem)):
                flags = _matrix(arm.runs, ids, lambda run, t, changed=changed: changed(
                    bool(run.base[t]["solved"]), bool(run.tasks[t]["solved"])))
                # counts: mean over runs, CI over reference groups (tasks)
                s = stats.summarize(flags * len(ids), groups=groups)
                fields.update(_interval_fields(s, f"{name}_"))
            rows.append({"backbone": arm.backbone, "agent": arm.agent, "method": arm.label,
                         "benchmark": bench, "runs": len(arm.runs), "paired_tasks": len(ids),
                         **fields,
                         "net_mean": fields["rescued_mean"] - fields["broken_mean"],
                         "few_tasks": len(ids) < stats.MIN_TASKS})
    return rows


def cost(arms: list) -> list:
    """Task-run tokens and world-model calls per task per arm and benchmark, with 95% CIs.

    Only evaluation-phase task runs: construction and selector training are reported separately
    (``metrics.building_cost``), as §4.4 defines the token figures.
    """
    rows = []
    for arm in sorted_arms(arms):
        for bench, ids in sorted(_columns(arm).items()):
            fields, groups = {}, task_groups(arm.runs, ids)
            for name, key in (("tokens_per_task", "tokens"),
                              ("cached_tokens_per_task", "cached_tokens"),
                              ("wm_calls_per_task", "calls")):
                s = stats.summarize(_matrix(arm.runs, ids, lambda run, t, key=key: int(
                    run.tasks[t].get(key) or 0)), groups=groups)
                fields.update(_interval_fields(s, f"{name}_"))
            rows.append({"backbone": arm.backbone, "agent": arm.agent, "method": arm.label,
                         "benchmark": bench, "runs": len(arm.runs), "tasks": len(ids), **fields})
    return rows


def write_csv(rows: list, path: pathlib.Path) -> None:
    """Writes dict rows as CSV (header = the first row's keys); an empty list gives an empty file.
    """
    with open(path, "w", newline="", encoding="utf-8") as f:
        if not rows:
            return
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_rows_csv(header: list, rows: list, path: pathlib.Path) -> None:
    """Writes a header and list rows as CSV."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _fmt(value) -> str:
    """Markdown cell text: yes/blank for flags, 4 significant digits below 1, '—' for None."""
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1 and value != 0 else f"{value:.1f}"
    return "—" if value is None else str(value)


def markdown(header: list, rows: list) -> str:
    """A GitHub-flavoured markdown table of ``header`` and ``rows``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_dicts(rows: list, columns: list) -> str:
    """A markdown table of dict rows restricted to ``columns``, in that order."""
    return markdown(columns, [[r[c] for c in columns] for r in rows])
