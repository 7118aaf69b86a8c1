"""Uncertainty of every reported number, and paired tests between methods.

Scores use the protocol's own seeded two-level bootstrap (``countermem_jax.protocol.intervals``): a
[runs × tasks] matrix, runs (selector seeds, pooled workdirs) drawn with replacement and one draw
of the shared tasks per replicate; with a single run it is a plain bootstrap over tasks.

A method-vs-method difference on the same agent, benchmark and tasks is tested over tasks: each
method's per-task outcome is its mean over its runs, and the per-task differences get
  * a paired bootstrap (the same ``intervals`` replicates of the mean difference): 95% CI and a
    two-sided p-value, 2 · min(P*(Δ ≤ 0), P*(Δ ≥ 0)) over the replicates, capped at 1;
  * an exact sign test (``scipy.stats.binomtest``) on the tasks where the two differ.
"""
import numpy as np
from scipy import stats as scipy_stats

from countermem_jax.protocol import intervals

MIN_TASKS = 20  # a cell resting on fewer held-out tasks is marked


def summarize(matrix, seed: int = intervals.BOOTSTRAP_SEED) -> dict:
    """Mean and 95% bootstrap CI of a [runs, tasks] matrix (``intervals.summarize``)."""
    return intervals.summarize(np.asarray(matrix, np.float64), seed=seed)


def paired_test(a_per_task, b_per_task) -> dict:
    """B − A over the same tasks: mean difference, 95% CI, bootstrap and sign-test p-values.

    Inputs are per-task outcomes in the same task order (e.g. 100 · solved, averaged over a
    method's runs). ``b_better`` / ``a_better`` count the tasks where one strictly beats the other;
    ties carry no information for the sign test and are left out of it.
    """
    a, b = np.asarray(a_per_task, np.float64), np.asarray(b_per_task, np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"paired outcomes must be two equal non-empty vectors, got {a.shape}, "
                         f"{b.shape}")
    diff = b - a
    summary = intervals.summarize(diff[None])
    replicates = intervals.bootstrap_means(diff[None])
    p_boot = min(1.0, 2.0 * min(float(np.mean(replicates <= 0)), float(np.mean(replicates >= 0))))
    better, worse = int(np.sum(diff > 0)), int(np.sum(diff < 0))
    p_sign = scipy_stats.binomtest(better, better + worse, 0.5).pvalue if better + worse else 1.0
    return {"difference": summary["mean"], "ci95": summary["ci95"], "tasks": int(a.size),
            "b_better": better, "a_better": worse, "p_bootstrap": p_boot,
            "p_sign_test": float(p_sign)}
