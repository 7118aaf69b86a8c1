"""One PNG per kind of data (matplotlib, Agg backend), each drawn from the rows ``tables`` writes
as CSV, so every plotted number is in a CSV next to it; every bar or point has its 95% CI.
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from countermem_jax.reporting.tables import FEW_TASKS_MARK  # noqa: E402

_DPI = 120


def _errors(rows: list, prefix: str = "") -> np.ndarray:
    """[2, n] asymmetric error bars from the rows' mean and CI fields."""
    mean = np.array([r[f"{prefix}mean"] for r in rows])
    low = np.array([r[f"{prefix}ci95_low"] for r in rows])
    high = np.array([r[f"{prefix}ci95_high"] for r in rows])
    return np.clip(np.stack([mean - low, high - mean]), 0, None)


def _label(row: dict, *keys) -> str:
    """Tick label joining the given fields, marked when the row rests on few tasks."""
    mark = FEW_TASKS_MARK if row.get("few_tasks") else ""
    return " · ".join(str(row[k]) for k in keys) + mark


def _save(fig, path) -> None:
    """Lays out, writes at ``_DPI`` and closes the figure (Agg keeps no window open)."""
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)


def scores(rows: list, path) -> None:
    """Bar chart of scores with CI error bars: one panel per (backbone, agent), bars per method
    grouped by benchmark. Benchmarks resting on few tasks carry the mark on their tick.
    """
    groups = list(dict.fromkeys((r["backbone"], r["agent"]) for r in rows))
    fig, axes = plt.subplots(1, len(groups), figsize=(max(5, 4 * len(groups)), 4), squeeze=False)
    for ax, (backbone, agent) in zip(axes[0], groups):
        mine = [r for r in rows if (r["backbone"], r["agent"]) == (backbone, agent)]
        benches = list(dict.fromkeys(r["benchmark"] for r in mine))
        methods = list(dict.fromkeys(r["method"] for r in mine))
        width = 0.8 / len(methods)
        for i, method in enumerate(methods):
            cells = [r for r in mine if r["method"] == method]
            x = np.array([benches.index(r["benchmark"]) for r in cells]) + (i - (len(methods) - 1)
                                                                           / 2) * width
            ax.bar(x, [r["mean"] for r in cells], width, yerr=_errors(cells), capsize=3,
                   label=method)
        ax.set_xticks(range(len(benches)), [b + (FEW_TASKS_MARK if any(
            r["few_tasks"] for r in mine if r["benchmark"] == b) else "") for b in benches])
        ax.set_ylim(0, 105)
        ax.set_ylabel("score (0-100), 95% bootstrap CI")
        ax.set_title(agent if len(groups) == 1 else f"{agent}\n{backbone}", fontsize=9)
        ax.legend(fontsize=8)
    _save(fig, path)


def differences(rows: list, path) -> None:
    """Forest plot of paired differences B − A with CIs, annotated with both p-values."""
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * len(rows)))
    y = np.arange(len(rows))[::-1]
    ax.errorbar([r["difference_b_minus_a"] for r in rows], y, xerr=_errors(
        [{"mean": r["difference_b_minus_a"], **r} for r in rows]), fmt="o", capsize=3)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(y, [f"{_label(r, 'agent', 'benchmark')}: {r['method_b']} − {r['method_a']}"
                      for r in rows], fontsize=8)
    for yi, r in zip(y, rows):
        ax.annotate(f"p={r['p_sign_test']:.3g} (sign), {r['p_bootstrap']:.3g} (boot)",
                    (r["ci95_high"], yi), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=7)
    low, high = ax.get_xlim()
    ax.set_xlim(low, high + 0.5 * (high - low))  # room for the p-value labels
    ax.set_xlabel("paired score difference B − A (pp), 95% paired bootstrap CI")
    _save(fig, path)


def rescued_broken(rows: list, path) -> None:
    """Rescued tasks as bars above zero and broken ones below, per method and benchmark, with CIs.
    """
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(rows) + 2), 4))
    x = np.arange(len(rows))
    ax.bar(x, [r["rescued_mean"] for r in rows], 0.6, yerr=_errors(rows, "rescued_"),
           capsize=3, color="tab:green", label="rescued")
    broken = _errors(rows, "broken_")[::-1]  # drawn downwards: low/high swap
    ax.bar(x, [-r["broken_mean"] for r in rows], 0.6, yerr=broken, capsize=3, color="tab:red",
           label="broken")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(x, [_label(r, "agent", "method", "benchmark") for r in rows], rotation=20,
                  ha="right", fontsize=8)
    ax.set_ylabel("held-out tasks vs the base agent (95% CI)")
    ax.legend(fontsize=8)
    _save(fig, path)


def cost(rows: list, path) -> None:
    """Two panels: task-run tokens per task and world-model calls per task, with CIs."""
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.4 * len(rows) + 4), 4))
    x = np.arange(len(rows))
    labels = [_label(r, "agent", "method", "benchmark") for r in rows]
    for ax, prefix, title in ((axes[0], "tokens_per_task_", "task-run tokens per task"),
                              (axes[1], "wm_calls_per_task_", "world-model calls per task")):
        ax.bar(x, [r[f"{prefix}mean"] for r in rows], 0.6, yerr=_errors(rows, prefix),
               capsize=3)
        ax.set_xticks(x, labels, rotation=20, ha="right", fontsize=8)
        ax.set_title(f"{title} (95% CI)")
    _save(fig, path)
