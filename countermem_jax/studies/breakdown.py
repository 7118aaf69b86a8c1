"""Study 9, benchmark breakdown (paper §5.4, Appendix D.7, Figure 6 / Table 6): per benchmark,
ReAct and Reflexion each against its own CounterMem version (same cell, same held-out tasks):
score gain (pp), call reduction and failure reduction per solved task (base ratio minus
CounterMem's, Appendix D.6), and the four-domain (Math, Coding, Text-to-SQL, SAT, equal domain
weight) and 12-benchmark (equal benchmark weight) summaries of the score gain.

Each (benchmark, agent) is one cell ``cells/<benchmark>/<agent>/`` running the three phases with
that paper setting's sizes (the study config's ``settings``). Rows of ``study.json``: panel a
``score_gain`` [selector seeds × tasks] of per-task paired differences; panels b, c
``call_reduction`` / ``failure_reduction`` as estimates (paired bootstrap of the ratio
difference); panel d the summaries (stratified bootstrap), computed over the benchmarks present
and naming the missing ones in the notes. Every interval draws the cell's reference groups
(``cells.reference_groups``) where its evaluation recorded them, else tasks.
"""
import numpy as np

from countermem_jax.domains import registry
from countermem_jax.reporting.load import AGENT_LABELS
from countermem_jax.studies import cells, estimates

TITLE = "Adding CounterMem to each base agent, per benchmark"
PAPER = "§5.4, Appendix D.7 (Figure 6, Table 6)"


def _domain(bench: str) -> str:
    """The paper domain a benchmark belongs to (registry), "other" for one it does not list."""
    spec = registry.BENCHMARKS.get(bench)
    return spec.paper_domain if spec else "other"


def run(cfg, workdir, *, backbone=None, benchmark=None) -> dict:
    """Runs every (benchmark, agent) cell of ``cfg.protocol`` into ``workdir`` and returns the
    ``study.json`` record (rows schema, panels a-d of Figure 6 / Table 6). ``backbone`` /
    ``benchmark`` replace the configured ones (tests, the scripted model)."""
    s, run_cfg = cfg.protocol, cfg.base
    st = cells.Study(cfg, workdir, backbone, benchmark)
    rows, gains, gain_groups, manifest = [], {}, {}, {}
    for bench in s.benchmarks:
        for agent in s.agents:
            label = AGENT_LABELS.get(agent, agent)
            ccfg = cells.setting_config(run_cfg, bench, cfg.get("settings"), **{"agent.kind": agent,
                                                       "method": "countermem"})
            cell = st.cell(f"{bench}/{agent}")
            result = st.run_phases(ccfg, cell)
            manifest = manifest or cells.read_splits(cell)
            base = cells.task_ends(cell, "base")
            mem_runs = [r for r in result["runs"] if r != "base"]
            mems = [cells.task_ends(cell, r) for r in mem_runs]
            ids = sorted(base)
            # Per selector seed, the paired per-task difference CounterMem − base, in pp.
            diff = [[100.0 * (bool(m[t]["solved"]) - bool(base[t]["solved"])) for t in ids]
                    for m in mems]
            gains.setdefault(agent, {})[bench] = diff
            groups = cells.reference_groups(result, ids)
            gain_groups.setdefault(agent, {})[bench] = groups
            rows.append(cells.row("a", "score gain", "score_gain", "score gain (pp)", label,
                                  bench, diff, mem_runs, "tasks", ids, unit_groups=groups))
            for panel, key, metric, title in (("b", "calls", "call_reduction",
                                               "call reduction per solved task"),
                                              ("c", "failures", "failure_reduction",
                                               "failure reduction per solved task")):
                pooled = [(base[t], m[t]) for m in mems for t in ids]  # seeds pooled over tasks
                est = estimates.reduction_per_solved(  # a task's seeds drawn with its group
                    [b[key] for b, _ in pooled], [bool(b["solved"]) for b, _ in pooled],
                    [m[key] for _, m in pooled], [bool(m["solved"]) for _, m in pooled],
                    groups=None if groups is None else groups * len(mems))
                rows.append(dict(cells.row(panel, title, metric, f"{title} (base − CounterMem)",
                                           label, bench, None, mem_runs, "tasks", ids),
                                 estimate=est))
    # Panel d: the score gain averaged with equal domain weight over the four domains, and with
    # equal benchmark weight over all benchmarks; a summary missing members says so in the notes.
    notes = []
    for agent, per_bench in gains.items():
        label = AGENT_LABELS.get(agent, agent)
        benches = list(per_bench)
        domain_of = [_domain(b) for b in benches]
        four = [b for b, d in zip(benches, domain_of) if d in registry.FOUR_DOMAINS]
        summaries = (
            ("four-domain", four, estimates.domain_weights([_domain(b) for b in four]),
             [d for d in registry.FOUR_DOMAINS if d not in {_domain(b) for b in four}]),
            ("12-benchmark", benches, None,
             [b.name for b in registry.paper_settings() if b.name not in per_bench]))
        for name, members, weights, missing in summaries:
            if not members:
                notes.append(f"{label}: no benchmark for the {name} summary")
                continue
            est = estimates.weighted_mean([per_bench[b] for b in members], weights,
                                          [gain_groups[agent][b] for b in members])
            rows.append(dict(cells.row("d", "summaries of the score gain", "score_gain_summary",
                                       "mean score gain (pp)", label, name, None, [],
                                       "benchmarks", tasks_behind=sum(
                                           np.shape(per_bench[b])[1] for b in members)),
                             estimate=est))
            if missing:
                notes.append(f"{label} {name} summary over {len(members)} benchmark(s); "
                             f"missing: {', '.join(missing)} (not the paper's summary)")
    record = st.write(title=TITLE, paper=PAPER, rows=rows, manifest=manifest, notes=notes)
    for r in rows:
        value = r["estimate"]["mean"] if r.get("estimate") else np.mean(r["values"])
        print(f"breakdown {r['method']:<10} {r['metric']:<20} {r['x']:<14} {value:.2f}")
    return record
