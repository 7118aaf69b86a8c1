"""Study 7, rescued and broken tasks (paper Appendix E.3, Figure 8a): per domain and method, the
same held-out tasks run with and without that method's memory (the cell's own base run): rescued
= failed without memory and solved with it, broken = the reverse, net = rescued − broken.
"""
import numpy as np

from countermem_jax.experiment import METHOD_LABELS
from countermem_jax.studies import cells

TITLE = "Benefits and harm from reuse"
PAPER = "Appendix E.3 (Figure 8a)"
CHANGES = {"rescued": lambda base, mem: mem and not base,
           "broken": lambda base, mem: base and not mem,
           "net": lambda base, mem: int(mem and not base) - int(base and not mem)}


def paired_rows(panel: str, label: str, x, cell, result: dict) -> list:
    """Rescued / broken / net rows of one evaluated cell against its own base run."""
    base = cells.task_ends(cell, "base")
    mem_runs = [r for r in result["runs"] if r != "base"]
    mems = [cells.task_ends(cell, r) for r in mem_runs]
    ids = sorted(base)
    groups = cells.reference_groups(result, ids)
    out = []
    for metric, changed in CHANGES.items():
        values = [[float(changed(bool(base[t]["solved"]), bool(m[t]["solved"]))) * len(ids)
                   for t in ids] for m in mems]
        out.append(cells.row(panel, "paired tasks vs the same agent without memory", metric,
                             "tasks (count)", label, x, values, mem_runs, "tasks", ids,
                             unit_groups=groups))
    return out


def run(cfg, workdir, *, backbone=None, benchmark=None) -> dict:
    """Runs one cell per benchmark and method into ``workdir`` and returns the ``study.json``
    record of rescued, broken and net task counts against each cell's base run (Appendix E.3,
    Figure 8a). ``backbone`` / ``benchmark`` replace the configured ones (tests)."""
    s, run_cfg = cfg.protocol, cfg.base
    st = cells.Study(cfg, workdir, backbone, benchmark)
    rows, manifest = [], {}
    for bench in s.benchmarks:
        for method in s.methods:
            ccfg = cells.setting_config(run_cfg, bench, cfg.get("settings"), method=method,
                                        **{"splits.n_eval": int(s.n_paired)})
            cell = st.cell(f"{bench}/{method}")
            result = st.run_phases(ccfg, cell)
            manifest = manifest or cells.read_splits(cell)
            rows += paired_rows("a", METHOD_LABELS.get(method, method), bench, cell, result)
    record = st.write(title=TITLE, paper=PAPER, rows=rows, manifest=manifest,
                      notes=[f"{s.n_paired} paired held-out tasks per benchmark"])
    for r in rows:
        print(f"rescued/broken {r['method']:<16} {r['x']:<12} {r['metric']:<8} "
              f"{np.mean(r['values']):.1f}")
    return record
