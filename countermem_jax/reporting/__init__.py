"""Turns evaluated workdirs into the paper's main table, figures and ``report.md``."""
from countermem_jax.reporting.load import ReportError

__all__ = ["ReportError"]
