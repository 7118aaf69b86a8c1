"""The backbone summary (paper Appendix E.1, Figure "Four-domain summaries of the main table"):
per agent–backbone group, the unaugmented agent's four-domain score and task-run tokens and
those of its CounterMem (CF Memory) version, drawn as one arrow per group, and the gain against
the base score. The band in the right panel is the spread across groups (mean ± one standard
deviation of the gains), not a confidence interval over runs, as the paper says of its figure.
"""
import numpy as np

from countermem_jax.domains import registry
from countermem_jax.reporting import tables

CAVEAT = ("The shaded band is variation across the agent–backbone groups (mean ± 1 s.d. of the "
          "gains), not a confidence interval over runs.")


def rows(arms: list) -> list:
    """One row per (backbone, agent) group having both a base run and a CounterMem run: base and
    CounterMem four-domain score and tokens (M), the gain (pp), and ``status`` naming the
    domains without a benchmark (then the scores are None)."""
    parts = {}   # (backbone, agent, method) -> {domain: [benchmark scores]}, tokens (M)
    for arm in arms:
        if arm.method not in ("none", "countermem"):
            continue
        key = (arm.backbone, arm.agent, arm.method)
        domains, tokens = parts.setdefault(key, ({}, [0.0]))
        for bench, ids in tables._columns(arm).items():
            solved = tables._matrix(arm.runs, ids, tables._solved)
            domains.setdefault(tables.paper_domain(bench, arm.benchmark), []).append(
                solved.mean())
            tokens[0] += tables._matrix(arm.runs, ids, lambda run, t: int(
                run.tasks[t].get("tokens") or 0)).mean(axis=0).sum() / 1e6
    out = []
    for backbone, agent in dict.fromkeys((b, a) for b, a, _ in parts):
        if (backbone, agent, "none") not in parts or (backbone, agent, "countermem") not in parts:
            continue
        row = {"backbone": backbone, "agent": agent, "status": ""}
        missing = set()
        for method, name in (("none", "base"), ("countermem", "countermem")):
            domains, tokens = parts[(backbone, agent, method)]
            gone = [d for d in registry.FOUR_DOMAINS if d not in domains]
            missing.update(gone)
            row[f"{name}_score"] = None if gone else float(np.mean(
                [np.mean(domains[d]) for d in registry.FOUR_DOMAINS]))
            row[f"{name}_tokens_m"] = tokens[0]
        if missing:
            row["status"] = "no four-domain score: " + ", ".join(
                d for d in registry.FOUR_DOMAINS if d in missing) + " not run"
        row["gain"] = (None if missing else row["countermem_score"] - row["base_score"])
        out.append(row)
    return out


def draw(summary: list, path) -> None:
    """Left: one arrow per group from (base tokens, base score) to its CounterMem version's.
    Right: gain against base score, the across-group band shaded. Groups without a
    four-domain score are listed under the figure instead of drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    shown = [r for r in summary if r["gain"] is not None]
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(shown):
        color, label = palette[i % len(palette)], f"{r['agent']} / {r['backbone']}"
        left.annotate("", (r["countermem_tokens_m"], r["countermem_score"]),
                      (r["base_tokens_m"], r["base_score"]),
                      arrowprops=dict(arrowstyle="->", color=color, lw=1.5))
        left.scatter([r["base_tokens_m"]], [r["base_score"]], color=color, label=label, s=12)
        right.scatter([r["base_score"]], [r["gain"]], color=color, label=label)
    if shown:
        gains = np.array([r["gain"] for r in shown])
        x = [r["base_score"] for r in shown]
        right.axhspan(gains.mean() - gains.std(), gains.mean() + gains.std(), alpha=0.15,
                      color="grey", label="across-group spread (not a CI)")
        right.set_xlim(min(x) - 5, max(x) + 5)
        left.legend(fontsize=7)
        right.legend(fontsize=7)
    left.set(xlabel="task-run tokens (M)", ylabel="four-domain score (0-100)",
             title="Base agent → CounterMem")
    right.set(xlabel="base four-domain score", ylabel="gain (pp)", title="Gain vs base score")
    notes = [f"{r['agent']} / {r['backbone']}: {r['status']}" for r in summary if r["status"]]
    fig.suptitle("Backbone summary (Appendix E.1). " + CAVEAT, fontsize=8)
    if notes:
        fig.text(0.01, 0.01, "; ".join(notes), fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)
