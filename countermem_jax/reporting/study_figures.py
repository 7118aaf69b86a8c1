"""One PNG per study in the paper's panel layout (matplotlib, Agg): panels (a), (b), ... side by
side, each drawn from the rows ``reporting.studies.rows`` writes as CSV. A panel whose x values
are numbers (accumulation checkpoints) is a line per method with its 95% CI as a band; any other
panel is grouped bars (x categories, one bar per method) with 95% CI error bars. A point without
a CI (a plain rate in the record) is drawn without error bar; an undefined value is left out and
labelled "n/a". A category resting on fewer than 20 units carries the † mark.
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from countermem_jax.reporting.tables import FEW_TASKS_MARK  # noqa: E402

_DPI = 120  # small PNGs, legible when the paper-layout panels are viewed side by side


def _numeric(values) -> bool:
    """All x values are numbers (a line panel), booleans excluded."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _err(rows: list) -> np.ndarray:
    """Asymmetric error bars [2, n] from each row's 95% CI; zero where the row has none."""
    out = []
    for r in rows:
        if r["ci95_low"] is None or r["mean"] is None:
            out.append((0.0, 0.0))
        else:
            out.append((max(r["mean"] - r["ci95_low"], 0.0), max(r["ci95_high"] - r["mean"], 0.0)))
    return np.array(out, np.float64).T.reshape(2, len(rows))


def _lines(ax, rows: list, colors: dict) -> None:
    """One line per method over numeric x (e.g. accumulation checkpoints, §5.2), its CI as a
    band, the few-tasks mark at the points resting on fewer than 20 units."""
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = sorted((r for r in rows if r["method"] == method and r["mean"] is not None),
                      key=lambda r: r["x"])
        if not mine:
            continue
        x = [r["x"] for r in mine]
        ax.plot(x, [r["mean"] for r in mine], marker="o", label=method, color=colors[method])
        banded = [r for r in mine if r["ci95_low"] is not None]
        if banded:
            ax.fill_between([r["x"] for r in banded], [r["ci95_low"] for r in banded],
                            [r["ci95_high"] for r in banded], alpha=0.2, color=colors[method])
        for r in mine:
            if r["few_tasks"]:
                ax.annotate(FEW_TASKS_MARK, (r["x"], r["mean"]), fontsize=8)
    ax.set_xticks(sorted({r["x"] for r in rows}))


def _bars(ax, rows: list, colors: dict) -> None:
    """Grouped bars: one group per x category, one bar per method side by side, CI error bars;
    an undefined mean is labelled "n/a" at zero, and a category's tick carries the few-tasks
    mark if any of its rows does."""
    cats = list(dict.fromkeys(str(r["x"]) for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    width = 0.8 / max(len(methods), 1)
    for i, method in enumerate(methods):
        mine = [r for r in rows if r["method"] == method]
        shown = [r for r in mine if r["mean"] is not None]
        # bar i of a group sits (i - centre) widths from the category's tick
        pos = np.array([cats.index(str(r["x"])) for r in shown]) + (i - (len(methods) - 1) / 2) \
            * width
        if shown:
            ax.bar(pos, [r["mean"] for r in shown], width, yerr=_err(shown), capsize=3,
                   label=method if len(methods) > 1 else None, color=colors[method])
        for r in mine:
            if r["mean"] is None:   # the reason when the record gives one ("not run: ...")
                ax.annotate(r.get("status") or "n/a",
                            (cats.index(str(r["x"])) + (i - (len(methods) - 1) / 2) * width, 0),
                            ha="center", fontsize=6, rotation=90 if r.get("status") else 0,
                            va="bottom")
    few = {str(r["x"]) for r in rows if r["few_tasks"]}
    ax.set_xticks(range(len(cats)), [c + (FEW_TASKS_MARK if c in few else "") for c in cats],
                  rotation=20 if len(cats) > 3 else 0, ha="right" if len(cats) > 3 else "center",
                  fontsize=8)
    ax.axhline(0, color="grey", lw=0.6)


def draw(record: dict, rows: list, path) -> None:
    """Writes ``record``'s figure to ``path`` (PNG): one panel per distinct ``panel`` of
    ``rows`` in order of appearance, titled with the study and the paper figure it mirrors."""
    panels = list(dict.fromkeys(r["panel"] for r in rows))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {m: palette[i % len(palette)]   # one colour per method in every panel
              for i, m in enumerate(dict.fromkeys(r["method"] for r in rows))}
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.2 * max(len(panels), 1), 3.8),
                             squeeze=False)
    for ax, panel in zip(axes[0], panels):
        mine = [r for r in rows if r["panel"] == panel]
        (_lines if _numeric([r["x"] for r in mine]) else _bars)(ax, mine, colors)
        ax.set_title(f"({panel}) {mine[0]['title']}", fontsize=9)
        ax.set_ylabel(f"{mine[0]['ylabel']}, 95% CI", fontsize=8)
        if len({r["method"] for r in mine}) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    title = f"{record.get('title', record['study'])} — {record.get('paper', '')}"
    missing = sorted({r["status"] for r in rows if r.get("status") and r["mean"] is None})
    if missing:   # e.g. "Math not run: Lean absent": no value averaged over fewer domains
        title += "\n" + "; ".join(missing)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
