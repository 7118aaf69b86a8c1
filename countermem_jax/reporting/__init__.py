"""Turns evaluated workdirs into the paper's main table, figures and ``report.md``.

  load      one workdir -> its evaluated arms (per-task outcomes per run) and its provenance;
            refuses runs that cannot be compared (``ReportError``)
  stats     95% bootstrap CIs (``countermem_jax.protocol.intervals``) and paired tests over tasks
  tables    the numbers behind every table and figure, as rows, CSV and markdown
  figures   one PNG per kind of data (matplotlib, Agg backend)
  build     ``write_report(run_dirs, out)``: everything above into one directory
The binary is ``python -m countermem_jax.report RUN_DIR... --out DIR``.
"""
from countermem_jax.reporting.load import ReportError

__all__ = ["ReportError"]
