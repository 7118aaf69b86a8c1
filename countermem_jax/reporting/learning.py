"""The selector's learning curve in the report: mean validation return at every checkpoint, per
workdir and selector seed (paper Appendix C.2: the checkpoint kept for evaluation is the highest
point of its seed's curve).
"""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from countermem_jax.runtime import curves  # noqa: E402

TAG = "validation/return"


def _points(seed_dir: pathlib.Path, curve_dir: pathlib.Path) -> tuple[list, str]:
    """(decisions, validation return) of one seed, and where they were read."""
    if curve_dir.is_dir():
        try:
            points = curves.read_scalars(curve_dir).get(TAG)
            if points:
                return points, "curves"
        except ImportError:   # no tensorboardX: best.json holds the same returns
            pass
    best = seed_dir / "best.json"
    if not best.exists():
        return [], ""
    returns = json.loads(best.read_text()).get("val_returns", {})
    return sorted((int(k), float(v)) for k, v in returns.items()), "best.json"


def rows(workdirs) -> list[dict]:
    """One row per checkpoint of every selector seed trained in ``workdirs``."""
    out = []
    for workdir in dict.fromkeys(str(w) for w in workdirs):   # a workdir once, in order
        root = pathlib.Path(workdir)
        for seed_dir in sorted((root / "selector").glob("seed_*"),
                               key=lambda p: int(p.name.split("_")[1])):
            points, source = _points(seed_dir, root / "curves" / "selector" / seed_dir.name)
            out += [{"workdir": workdir, "seed": int(seed_dir.name.split("_")[1]),
                     "decisions": step, "validation_return": value, "source": source}
                    for step, value in points]
    return out


def figure(curve_rows: list, path) -> None:
    """One line per (workdir, seed): validation return against training decisions."""
    fig, ax = plt.subplots(figsize=(7, 4))
    keys = dict.fromkeys((r["workdir"], r["seed"]) for r in curve_rows)
    several = len({w for w, _ in keys}) > 1
    for workdir, seed in keys:
        points = [r for r in curve_rows if (r["workdir"], r["seed"]) == (workdir, seed)]
        label = (f"{pathlib.Path(workdir).name} · " if several else "") + f"seed {seed}"
        ax.plot([r["decisions"] for r in points], [r["validation_return"] for r in points],
                marker="o", label=label)
    ax.set_xlabel("training decisions")
    ax.set_ylabel("mean validation return")
    ax.set_title("Selector learning curve (validation at each checkpoint)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def section(workdirs, csv_of, png_of) -> list[str]:
    """The report's markdown lines for the learning curve, its CSV and PNG ([] without seeds)."""
    curve_rows = rows(workdirs)
    if not curve_rows:
        return []
    csv_of("learning_curve.csv", curve_rows)
    png_of("learning_curve.png", figure, curve_rows)
    return ["## Selector learning curve", "",
            "Mean validation return of the greedy selector at every checkpoint, per selector "
            "seed; each seed evaluates its highest checkpoint. Read from the run's curves "
            "(`WORKDIR/curves`, or each seed's `best.json` where there are none). Numbers: "
            "`learning_curve.csv`.", "", "![learning curve](learning_curve.png)", ""]
