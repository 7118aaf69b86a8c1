"""``write_report(run_dirs, out)``: the main table, the numbers behind every table and figure as
CSV, one PNG per kind of data and ``report.md`` embedding them, with every workdir's provenance
(paper §4, Table 1; Appendix E.3 for rescued/broken). Nothing is written before the run dirs
have been loaded and found comparable.
"""
import pathlib

from countermem_jax.protocol import intervals, provenance
from countermem_jax.reporting import (backbone_summary, domain_studies, figures, load, stats,
                                      study_figures, studies, tables)
from countermem_jax.reporting import learning

# One row per workdir in provenance.csv and the report's last table (Reproducibility statement:
# every figure traces back to its tasks, stores, checkpoints and code).
_PROVENANCE_COLUMNS = ("workdir", "method", "agent", "benchmark", "held-out tasks", "seeds",
                       "splits hash", "store hash", "config fingerprints",
                       "selector checkpoints", "code version (recorded)", "backbone")


def _provenance_rows(provenances: list) -> list:
    """One provenance row per workdir: what was run, on which tasks and stores, by which code.

    Missing records show ``load.NOT_RECORDED`` rather than being guessed.
    """
    def joined(mapping):
        """``{name: fingerprint}`` as one cell, or NOT_RECORDED when empty."""
        return "; ".join(f"{k}: {v}" for k, v in mapping.items()) or load.NOT_RECORDED
    return [{"workdir": p.workdir, "method": p.method, "agent": p.agent, "benchmark": p.benchmark,
             "held-out tasks": len(p.eval_ids), "seeds": ", ".join(p.seeds) or "none",
             "splits hash": p.splits_hash, "store hash": p.store_hash,
             "config fingerprints": joined(p.config_fingerprints),
             "selector checkpoints": joined(p.selector_fingerprints) if p.selector_fingerprints
             else "none (no trained selector)",
             "code version (recorded)": p.code_version, "backbone": p.backbone}
            for p in provenances]


# Column orders of the CSV-backed markdown tables, as ``tables`` names its row keys:
# paired method differences over the same held-out tasks (percentage points, §4.4),
_DIFF_COLUMNS = ["agent", "benchmark", "method_a", "method_b", "tasks", "difference_b_minus_a",
                 "ci95_low", "ci95_high", "tasks_b_better", "tasks_a_better", "p_bootstrap",
                 "p_sign_test"]
# rescued / broken tasks against the same workdir's base agent (Appendix E.3),
_RB_COLUMNS = ["agent", "method", "benchmark", "runs", "paired_tasks", "rescued_mean",
               "rescued_ci95_low", "rescued_ci95_high", "broken_mean", "broken_ci95_low",
               "broken_ci95_high", "net_mean"]
# and the task runs' cost: LLM tokens (and the prompt tokens among them served from the
# server's prefix cache) and world-model calls per task (§4.4).
_COST_COLUMNS = ["agent", "method", "benchmark", "runs", "tasks", "tokens_per_task_mean",
                 "tokens_per_task_ci95_low", "tokens_per_task_ci95_high",
                 "cached_tokens_per_task_mean", "wm_calls_per_task_mean",
                 "wm_calls_per_task_ci95_low", "wm_calls_per_task_ci95_high"]


def write_report(run_dirs, out) -> dict:
    """Writes the report into ``out``; returns {name: path} of everything written.

    Run dirs holding a ``study.json`` are studies (``reporting.studies``: one figure, its CSVs
    and a section per study), the others evaluated workdirs: ``main_table.csv`` and
    ``domain_table.csv`` (per benchmark and in Table 1's domain layout), ``scores.csv``,
    ``differences.csv``, ``rescued_broken.csv``, ``cost.csv`` and ``provenance.csv`` (the
    numbers behind every table and figure), one PNG per kind of data (a difference or
    rescued/broken figure only when there is something to pair), and ``report.md`` embedding
    them with a sentence on how each interval was computed. Everything is loaded and checked
    comparable first, so a refusal leaves ``out`` untouched.
    """
    # Load and check everything before creating ``out``: a refusal writes nothing.
    load.check_distinct(run_dirs)
    study_dirs = [d for d in run_dirs if studies.is_study(d)]
    workdirs = [d for d in run_dirs if not studies.is_study(d)]
    arms, provenances = load.load_all(workdirs) if workdirs else ([], [])
    records = [studies.load(d) for d in study_dirs]
    studies.check_studies(records, [(p.workdir, p.code_version) for p in provenances])
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
    now = provenance.code_version()
    # The header says when and by which code the report was generated, from how many inputs.
    md = ["# CounterMem-JAX report", "",
          f"Generated {provenance.now_utc()}"
          f" by code version `{now}` (`provenance.code_version`: git describe --always --dirty)"
          f" from {len(workdirs)} workdir(s) and {len(records)} study director"
          + ("y" if len(records) == 1 else "ies") + ".", ""]
    if arms:
        md += _main_sections(arms, provenances, out, written, csv_of, png_of, now)
        md += learning.section([p.workdir for p in provenances], csv_of, png_of)
    md += _study_sections(records, out, written, csv_of)
    written["report.md"] = out / "report.md"
    written["report.md"].write_text("\n".join(md), encoding="utf-8")
    return written


# A study's rows (``studies.rows``) and its paired tests (``studies.differences``), in the
# column order of the study's markdown tables.
_STUDY_COLUMNS = ["panel", "metric", "method", "x", "mean", "ci95_low", "ci95_high",
                  "std_over_runs", "runs", "units", "units_n"]
_STUDY_DIFF_COLUMNS = ["panel", "metric", "x", "method_a", "method_b", "tasks",
                       "difference_b_minus_a", "ci95_low", "ci95_high", "p_bootstrap",
                       "p_sign_test"]


def _study_sections(records: list, out, written, csv_of) -> list:
    """Per study record: its rows and paired tests as CSV and markdown, and its figure in the
    paper's panel layout (``study_figures``). Returns the markdown lines; the files written are
    added to ``written``."""
    md = []
    names = {}
    for record in records:
        # Two records of the same study (e.g. two backbones) get numbered file stems.
        names[record["study"]] = names.get(record["study"], 0) + 1
        stem = "study_" + record["study"] + (f"_{names[record['study']]}"
                                             if names[record["study"]] > 1 else "")
        rows = studies.rows(record)
        diffs = (studies.differences(record) if record["schema"] != studies.DOMAINS_SCHEMA
                 else domain_studies.differences(record, rows))
        csv_of(f"{stem}.csv", rows)
        written[f"{stem}.png"] = out / f"{stem}.png"
        columns = _STUDY_COLUMNS
        if record["schema"] == studies.DOMAINS_SCHEMA:  # Fig. 4: four-domain values drawn,
            columns = _STUDY_COLUMNS[:3] + ["scope", "x", "mean", "ci95_low", "ci95_high",
                                            "units_n", "status"]   # each domain's in the table
            study_figures.draw(record, [r for r in rows if r["scope"] == domain_studies.FOUR],
                               written[f"{stem}.png"])
        else:
            study_figures.draw(record, rows, written[f"{stem}.png"])
        md += [f"## Study: {record.get('title', record['study'])} ({record.get('paper', '')})",
               "", f"From `{record['_dir']}`, code version `{record.get('code_version')}`, "
               f"backbone `{record.get('backbone')}`.", "",
               tables.markdown_dicts([{**r, "method": r["method"] + (
                   tables.FEW_TASKS_MARK if r["few_tasks"] else "")} for r in rows],
                   columns), "",
               f"Mean and 95% bootstrap CI over runs (seeds, orderings) and units where a row "
               f"has several runs, over units otherwise; {tables.FEW_TASKS_MARK} = fewer than "
               f"{stats.MIN_TASKS} units. Numbers: `{stem}.csv`.", "",
               f"![{record['study']}]({stem}.png)", ""]
        if diffs:
            csv_of(f"{stem}_differences.csv", diffs)
            md += ["Paired tests over the same tasks (B − A, pp; paired bootstrap and exact sign "
                   "test):", "", tables.markdown_dicts(diffs, _STUDY_DIFF_COLUMNS), "",
                   f"Numbers: `{stem}_differences.csv`.", ""]
        md += [f"- {note}" for note in record.get("notes", [])] + [""]
    return md


def _main_sections(arms, provenances, out, written, csv_of, png_of, now) -> list:
    """The main table, per-benchmark scores, paired differences, rescued/broken, cost and
    provenance of the evaluated workdirs (``arms``: one per workdir, method and run). Returns the
    markdown lines; CSVs and PNGs go to ``out`` through ``csv_of`` / ``png_of``, which record
    them in ``written``. ``now`` is the code version generating the report, shown next to the
    versions the workdirs recorded."""

    # Table 1 twice: per benchmark (main_table) and per paper domain (domain_table).
    score_rows = tables.scores(arms)
    header, main_rows = tables.main_table(score_rows)
    written["main_table.csv"] = out / "main_table.csv"
    tables.write_rows_csv(header, main_rows, written["main_table.csv"])
    domain_header, domain_rows = tables.domain_table(arms)
    written["domain_table.csv"] = out / "domain_table.csv"
    tables.write_rows_csv(domain_header, domain_rows, written["domain_table.csv"])
    several_backbones = len({a.backbone for a in arms}) > 1
    unit = tables.resampled_unit(arms)  # what every interval below resampled

    def columns(names):  # the backbone column only where it tells rows apart
        return (["backbone"] if several_backbones else []) + names
    # The numbers behind every figure as CSV; a figure only where it has something to show.
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
    # Each section: the table, one sentence on how its intervals were computed, its CSV, its PNG.
    md = [
        "## Main table (Table 1 layout)", "",
        tables.markdown(domain_header, domain_rows), "",
        "Per paper domain (benchmark registry), the equal-weight mean of its benchmarks' scores; "
        "task-run tokens in millions (mean over runs of the total). 95% CIs from a stratified "
        f"bootstrap (each benchmark resampled on its own) over {unit}. Numbers: "
        "`domain_table.csv`.", "",
    ]
    groups = backbone_summary.rows(arms)
    if groups:   # Appendix E.1: one arrow per agent–backbone group, base -> CounterMem
        csv_of("backbone_summary.csv", groups)
        png_of("backbone_summary.png", backbone_summary.draw, groups)
        md += ["## Backbone summary (Appendix E.1)", "",
               tables.markdown_dicts(groups, list(groups[0])), "",
               "Four-domain score: the mean of Math, Coding, Text-to-SQL and SAT, each the mean "
               f"of its benchmarks; tokens in millions. {backbone_summary.CAVEAT} Numbers: "
               "`backbone_summary.csv`.", "", "![backbone summary](backbone_summary.png)", ""]
    md += [
        "## Scores per benchmark", "",
        tables.markdown(header, main_rows), "",
        f"Score (0-100) with 95% bootstrap CI: {intervals.N_RESAMPLES} resamples, numpy seed "
        f"{intervals.BOOTSTRAP_SEED}; over runs (selector seeds, pooled workdirs) where a row has "
        f"several, and over {unit}. {tables.FEW_TASKS_MARK} the cell rests on "
        f"fewer than {stats.MIN_TASKS} held-out tasks. Numbers: `main_table.csv`, `scores.csv`.",
        "", "![scores](scores.png)", "",
        "## Paired differences between methods", "",
    ]
    if diff_rows:
        md += [tables.markdown_dicts(diff_rows, columns(_DIFF_COLUMNS)), "",
               "B − A in percentage points over the same held-out tasks (each method's per-task "
               "outcome averaged over its runs); 95% paired-bootstrap CI and two-sided p-value "
               f"over {unit}; exact sign test (scipy.stats.binomtest) over the tasks where the "
               "two differ, per task even where groups are known (it counts the tasks B wins "
               "against those A wins). Numbers: `differences.csv`.", "",
               "![differences](differences.png)", ""]
    else:
        md += ["Only one method per agent and benchmark: nothing to compare.", ""]
    md += ["## Rescued and broken tasks (vs the base agent, Appendix E.3)", ""]
    if rb_rows:
        md += [tables.markdown_dicts(rb_rows, columns(_RB_COLUMNS)), "",
               "Per method against its own workdir's base run on the same tasks; mean over runs, "
               f"95% bootstrap CI over {unit}. Numbers: `rescued_broken.csv`.", "",
               "![rescued and broken](rescued_broken.png)", ""]
    else:
        md += ["Only the base agent was given: nothing to pair.", ""]
    md += ["## Cost of the task runs", "", tables.markdown_dicts(cost_rows, columns(_COST_COLUMNS)), "",
           f"Mean per task, 95% bootstrap CIs over {unit}. Numbers: `cost.csv`.", "",
           "![cost](cost.png)", "",
           "## Provenance", "",
           tables.markdown(list(_PROVENANCE_COLUMNS),
                           [[r[c] for c in _PROVENANCE_COLUMNS] for r in prov_rows]), "",
           f"Code version now: `{now}`. \"{load.NOT_RECORDED}\": the run directory does not hold "
           "it. Backbone: the configured identity recorded in fingerprint.json. Numbers: "
           "`provenance.csv`.", "", "Resampled unit of the intervals, per workdir:", ""]
    md += [f"- `{p.workdir}`: " + (f"{p.reference_groups} reference groups of {len(p.eval_ids)} "
                                   "held-out tasks (metrics.json `aggregate.per_task`)"
                                   if p.reference_groups is not None else
                                   f"the {len(p.eval_ids)} held-out tasks (no reference groups "
                                   "recorded)") for p in provenances]
    md += [""]
    return md
