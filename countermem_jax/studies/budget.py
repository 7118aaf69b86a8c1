"""Study 8, comparison at a common task-run token budget (paper Appendix E.2, Figure 7):
ReasoningBank, ReasoningBank + MaTTS, ReasoningBank + verified feedback and CounterMem, each
given the same task-run tokens in every domain.
"""
import numpy as np

from countermem_jax.domains import registry
from countermem_jax.experiment import METHOD_LABELS, Workdir
from countermem_jax.phases import context
from countermem_jax.studies import cells, estimates

TITLE = "Comparison at a common task-run token budget"
PAPER = "Appendix E.2 (Figure 7)"


def construction_tokens(cell, build_ids: list) -> list:
    """Task-run tokens of each construction task in build order (every rollout of a task)."""
    spent = dict.fromkeys(build_ids, 0)
    for e in Workdir(cell).log.events("task_end"):
        if e.get("phase") == "construction" and e["task_id"] in spent:
            spent[e["task_id"]] += int(e.get("tokens") or 0)
    return [spent[t] for t in build_ids]


def affordable_prefix(costs: list, budget: float) -> int:
    """The number of leading tasks whose summed cost stays within ``budget``."""
    total, n = 0, 0
    for cost in costs:
        if total + cost > budget:
            break
        total, n = total + cost, n + 1
    return n


def within_budget(ends: dict, eval_ids: list, budget: float) -> tuple[list, int, int]:
    """(solved within budget per task, tokens spent, tasks cut off): tasks in split order, each
    counted if the running task-run tokens after it stay within ``budget``."""
    out, total, cut = [], 0, 0
    for t in eval_ids:
        total += int(ends[t].get("tokens") or 0)
        inside = total <= budget
        cut += not inside
        out.append(100.0 * (inside and bool(ends[t]["solved"])))
    return out, min(total, int(budget)), cut


def run(cfg, workdir, *, backbone=None, benchmark=None) -> dict:
    """Runs the common-budget comparison into ``workdir`` (one cell per benchmark and method,
    each building over the budget's construction prefix) and returns its ``study.json`` record
    (Appendix E.2, Figure 7). ``backbone`` / ``benchmark`` replace the configured ones."""
    s, run_cfg = cfg.protocol, cfg.base
    if not 0 < s.construction_fraction < 1:
        raise cells.StudyError(f"protocol.construction_fraction={s.construction_fraction}: must "
                               "be strictly between 0 and 1")
    st = cells.Study(cfg, workdir, backbone, benchmark)
    per_bench = s.token_budget / len(s.benchmarks)
    build_share, solve_share = per_bench * s.construction_fraction, \
        per_bench * (1 - s.construction_fraction)
    notes = [f"budget {s.token_budget:,} task-run tokens per method = {per_bench:,.0f} per "
             f"benchmark: {build_share:,.0f} construction + {solve_share:,.0f} solving "
             f"(construction_fraction {s.construction_fraction}); selector training not charged"]
    rows, scores, manifest = [], {}, {}
    for bench in s.benchmarks:
        bcfg = cells.setting_config(run_cfg, bench, cfg.get("settings"))
        sp = context.draw_splits(bcfg, st.benchmark_for(bcfg)[0])
        fixed = dict(train=cells.ids(sp.train), validation=cells.ids(sp.validation),
                     eval=cells.ids(sp.eval))
        build_ids = cells.ids(sp.build)
        for method in s.methods:
            probe = st.cell(f"{bench}/{method}/probe")
            pcfg = cells.phase_config(bcfg, method=method, **{"splits.manifest": st.manifest(
                probe, build=build_ids, **fixed)})
            st.run_phases(pcfg, probe, train=False, evaluate=False)
            costs = construction_tokens(probe, build_ids)
            n = affordable_prefix(costs, build_share)
            cell = probe if n == len(build_ids) else st.cell(f"{bench}/{method}")
            ccfg = cells.phase_config(bcfg, method=method, **{"splits.manifest": st.manifest(
                cell, build=build_ids[:n], **fixed)})
            result = st.run_phases(ccfg, cell)
            manifest = manifest or cells.read_splits(cell)
            ends = cells.task_ends(cell, cells.memory_run(result))
            solved, spent, cut = within_budget(ends, fixed["eval"], solve_share)
            label = METHOD_LABELS.get(method, method)
            groups = cells.reference_groups(result, fixed["eval"])  # None: draw tasks
            scores.setdefault(label, []).append((bench, [solved], groups))
            rows.append(cells.row("a", "score within the budget", "score", "score (0-100)",
                                  label, bench, [solved], ["budgeted run"], "tasks",
                                  fixed["eval"], unit_groups=groups))
            training = sum(int(e.get("tokens") or 0) for e in Workdir(cell).log.events("task_end")
                           if e.get("phase") == "selector_training")
            notes.append(f"{bench} {label}: {n} of {len(build_ids)} construction tasks "
                         f"({sum(costs[:n]):,} tokens), solving {spent:,} tokens, "
                         f"{cut} held-out task(s) past the budget; selector training "
                         f"{training:,} tokens (not charged)")
    for label, parts in scores.items():
        domains = [registry.BENCHMARKS[b].paper_domain if b in registry.BENCHMARKS else b
                   for b, _, _ in parts]
        est = estimates.weighted_mean([v for _, v, _ in parts], estimates.domain_weights(domains),
                                      [g for _, _, g in parts])
        rows.append(dict(cells.row("b", "average (equal domain weight)", "score_average",
                                   "score (0-100)", label, "average", None, [], "domains",
                                   tasks_behind=sum(len(v[0]) for _, v, _ in parts)),
                         estimate=est))
    record = st.write(title=TITLE, paper=PAPER, rows=rows, manifest=manifest, notes=notes)
    for note in notes:
        print(f"budget: {note}")
    for r in rows:
        value = r["estimate"]["mean"] if r.get("estimate") else np.mean(r["values"])
        print(f"budget {r['method']:<24} {r['x']:<12} {value:.1f}")
    return record
