"""``write_report(run_dirs, out)``: the main table, the numbers behind every table and figure as
CSV, one PNG per kind of data and ``report.md`` embedding them, with every workdir's provenance
(paper §4, Table 1; Appendix E.3 for rescued/broken). Nothing is written before the run dirs
have been loaded and found comparable.
"""
import datetime
import pathlib

from countermem_jax import intervals
from countermem_jax.reporting import figures, load, stats, tables

_PROVENANCE_COLUMNS = ("workdir", "method", "agent", "benchmark", "held-out tasks", "seeds",
                       "splits hash", "store hash", "config fingerprints",
                       "selector checkpoints", "code version (recorded)", "backbone")


def _provenance_rows(provenances: list) -> list:
    """One provenance row per workdir: what was run, on which tasks and stores, by which code.

    Missing records show ``load.NOT_RECORDED`` rather than being guessed.
    """
    def joined(mapping):
        return "; ".join(f"{k}: {v}" for k, v in mapping.items()) or load.NOT_RECORDED
    return [{"workdir": p.workdir, "method": p.method, "agent": p.agent, "benchmark": p.benchmark,
             "held-out tasks": len(p.eval_ids), "seeds": ", ".join(p.seeds) or "none",
             "splits hash": p.splits_hash, "store hash": p.store_hash,
             "config fingerprints": joined(p.config_fingerprints),
             "selector checkpoints": joined(p.selector_fingerprints) if p.selector_fingerprints
             else "none (no trained selector)",
             "code version (recorded)": p.code_version, "backbone": p.backbone}
            for p in provenances]


_DIFF_COLUMNS = ["agent", "benchmark", "method_a", "method_b", "tasks", "difference_b_minus_a",
                 "ci95_low", "ci95_high", "tasks_b_better", "tasks_a_better", "p_bootstrap",
                 "p_sign_test"]
_RB_COLUMNS = ["agent", "method", "benchmark", "runs", "paired_tasks", "rescued_mean",
               "rescued_ci95_low", "rescued_ci95_high", "broken_mean", "broken_ci95_low",
               "broken_ci95_high", "net_mean"]
_COST_COLUMNS = ["agent", "method", "benchmark", "runs", "tasks", "tokens_per_task_mean",
                 "tokens_per_task_ci95_low", "tokens_per_task_ci95_high", "wm_calls_per_task_mean",
                 "wm_calls_per_task_ci95_low", "wm_calls_per_task_ci95_high"]


def write_report(run_dirs, out) -> dict:
    """Writes the report into ``out``; returns {name: path} of everything written.

    Files: ``main_table.csv`` and ``domain_table.csv`` (per benchmark and in Table 1's domain
    layout), ``scores.csv``, ``differences.csv``, ``rescued_broken.csv``, ``cost.csv`` and
    ``provenance.csv`` (the numbers behind every table and figure), one PNG per kind of data
    (a difference or rescued/broken figure only when there is something to pair), and
    ``report.md`` embedding them with a sentence on how each interval was computed. The run
    directories are loaded and checked comparable first, so a refusal leaves ``out`` untouched.
    """
    arms, provenances = load.load_all(run_dirs)  # refuses before anything is written
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {}

    def csv_of(name, rows):
        """Writes ``rows`` as CSV ``name`` in ``out`` and records it."""
        written[name] = out / name
        tables.write_csv(rows, written[name])

    def png_of(name, draw, rows):
        """Draws ``rows`` with ``draw`` into PNG ``name`` in ``out`` and records it."""
        written[name] = out / name
        draw(rows, written[name])

    score_rows = tables.scores(arms)
    header, main_rows = tables.main_table(score_rows)
    written["main_table.csv"] = out / "main_table.csv"
    tables.write_rows_csv(header, main_rows, written["main_table.csv"])
    domain_header, domain_rows = tables.domain_table(arms)
    written["domain_table.csv"] = out / "domain_table.csv"
    tables.write_rows_csv(domain_header, domain_rows, written["domain_table.csv"])
    several_backbones = len({a.backbone for a in arms}) > 1

    def columns(names):  # the backbone column only where it tells rows apart
        return (["backbone"] if several_backbones else []) + names
    csv_of("scores.csv", score_rows)
    png_of("scores.png", figures.scores, score_rows)
    diff_rows, rb_rows, cost_rows = (tables.differences(arms), tables.rescued_broken(arms),
                                     tables.cost(arms))
    csv_of("differences.csv", diff_rows)
    csv_of("rescued_broken.csv", rb_rows)
    csv_of("cost.csv", cost_rows)
    if diff_rows:
        png_of("differences.png", figures.differences, diff_rows)
    if rb_rows:
        png_of("rescued_broken.png", figures.rescued_broken, rb_rows)
    png_of("cost.png", figures.cost, cost_rows)
    prov_rows = _provenance_rows(provenances)
    csv_of("provenance.csv", prov_rows)
    now = load.code_version_now()
    md = [
        "# CounterMem-JAX report", "",
        f"Generated {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}"
        f" by code version `{now}` (git describe --always --dirty) from {len(provenances)} run "
        "director" + ("y" if len(provenances) == 1 else "ies") + ".", "",
        "## Main table (Table 1 layout)", "",
        tables.markdown(domain_header, domain_rows), "",
        "Per paper domain (benchmark registry), the equal-weight mean of its benchmarks' scores; "
        "task-run tokens in millions (mean over runs of the total). 95% CIs from a stratified "
        "bootstrap (each benchmark resampled on its own). Numbers: `domain_table.csv`.", "",
        "## Scores per benchmark", "",
        tables.markdown(header, main_rows), "",
        f"Score (0-100) with 95% bootstrap CI: {intervals.N_RESAMPLES} resamples, numpy seed "
        f"{intervals.BOOTSTRAP_SEED}; over runs (selector seeds, pooled workdirs) and tasks where "
        f"a row has several runs, over tasks otherwise. {tables.FEW_TASKS_MARK} the cell rests on "
        f"fewer than {stats.MIN_TASKS} held-out tasks. Numbers: `main_table.csv`, `scores.csv`.",
        "", "![scores](scores.png)", "",
        "## Paired differences between methods", "",
    ]
    if diff_rows:
        md += [tables.markdown_dicts(diff_rows, columns(_DIFF_COLUMNS)), "",
               "B − A in percentage points over the same held-out tasks (each method's per-task "
               "outcome averaged over its runs); 95% paired-bootstrap CI and two-sided p-value; "
               "exact sign test (scipy.stats.binomtest) over the tasks where the two differ. "
               "Numbers: `differences.csv`.", "", "![differences](differences.png)", ""]
    else:
        md += ["Only one method per agent and benchmark: nothing to compare.", ""]
    md += ["## Rescued and broken tasks (vs the base agent, Appendix E.3)", ""]
    if rb_rows:
        md += [tables.markdown_dicts(rb_rows, columns(_RB_COLUMNS)), "",
               "Per method against its own workdir's base run on the same tasks; mean over runs, "
               "95% bootstrap CI. Numbers: `rescued_broken.csv`.", "",
               "![rescued and broken](rescued_broken.png)", ""]
    else:
        md += ["Only the base agent was given: nothing to pair.", ""]
    md += ["## Cost of the task runs", "", tables.markdown_dicts(cost_rows, columns(_COST_COLUMNS)), "",
           "Numbers: `cost.csv`.", "", "![cost](cost.png)", "",
           "## Provenance", "",
           tables.markdown(list(_PROVENANCE_COLUMNS),
                           [[r[c] for c in _PROVENANCE_COLUMNS] for r in prov_rows]), "",
           f"Code version now: `{now}`. \"{load.NOT_RECORDED}\": the run directory does not hold "
           "it. Backbone: the configured identity recorded in fingerprint.json. Numbers: "
           "`provenance.csv`.", ""]
    written["report.md"] = out / "report.md"
    written["report.md"].write_text("\n".join(md), encoding="utf-8")
    return written
