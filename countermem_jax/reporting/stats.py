"""Uncertainty of every reported number, and paired tests between methods."""
import numpy as np
from scipy import stats as scipy_stats

from countermem_jax.protocol import intervals

MIN_TASKS = 20  # a cell resting on fewer held-out tasks is marked


def shared_groups(maps: list, ids: list) -> list | None:
    """One reference-group key per task of ``ids`` from several recorded groupings (``maps``:
    task id -> group, or None where not recorded), or None when none is recorded. Pooled runs
    share their tasks; where their groupings differ, tasks any of them puts together stay
    together (a task a map lacks is its own group there)."""
    maps = [m for m in maps if m is not None]
    if not maps:
        return None
    parent = list(range(len(ids)))

    def root(i):
        """The representative of task index ``i``'s merged group."""
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for groups in maps:
        first = {}
        for i, t in enumerate(ids):
            j = first.setdefault(groups.get(t, ("task", t)), i)
            parent[root(i)] = root(j)
    return [ids[root(i)] for i in range(len(ids))]


def summarize(matrix, seed: int = intervals.BOOTSTRAP_SEED, groups=None) -> dict:
    """Mean and 95% bootstrap CI of a [runs, tasks] matrix (``intervals.summarize``), drawing
    reference groups (``groups``: one key per task column) where given, else tasks."""
    return intervals.summarize(np.asarray(matrix, np.float64), seed=seed, groups=groups)


def paired_test(a_per_task, b_per_task, groups=None) -> dict:
    """B − A over the same tasks: mean difference, 95% CI, bootstrap and sign-test p-values.

    Inputs are per-task outcomes in the same task order (e.g. 100 · solved, averaged over a
    method's runs); ``groups`` (one reference group per task, or None) makes the bootstrap draw
    whole groups. ``b_better`` / ``a_better`` count the tasks where one strictly beats the other;
    ties carry no information for the sign test and are left out of it. ``groups`` in the result
    is the number of units the bootstrap resampled (the task count without groups).
    """
    a, b = np.asarray(a_per_task, np.float64), np.asarray(b_per_task, np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"paired outcomes must be two equal non-empty vectors, got {a.shape}, "
                         f"{b.shape}")
    diff = b - a
    # success rates (0–100 per task): the score interval with the groups' design effect, which
    # keeps its coverage with few discordant tasks; any other value: the grouped bootstrap
    proportions = bool(np.all((a >= 0) & (a <= 100) & (b >= 0) & (b <= 100)))
    summary = (intervals.summarize_difference(diff[None], groups=groups) if proportions
               else intervals.summarize(diff[None], groups=groups))
    replicates = intervals.bootstrap_means(diff[None], groups=groups)
    p_boot = min(1.0, 2.0 * min(float(np.mean(replicates <= 0)), float(np.mean(replicates >= 0))))
    better, worse = int(np.sum(diff > 0)), int(np.sum(diff < 0))
    p_sign = scipy_stats.binomtest(better, better + worse, 0.5).pvalue if better + worse else 1.0
    return {"difference": summary["mean"], "ci95": summary["ci95"], "tasks": int(a.size),
            "interval": summary["method"],
            "groups": summary["groups"],
            "b_better": better, "a_better": worse, "p_bootstrap": p_boot,
            "p_sign_test": float(p_sign)}
