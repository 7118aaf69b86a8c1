"""Estimates a study reports that are not a mean of per-unit values, each with a 95% bootstrap
CI over the same tasks (``intervals``: 10,000 resamples, seeded): a paired difference of
per-solved-task ratios (Appendix D.6: call and failure reductions) and an equal-weight mean of
several benchmarks or domains (stratified: each part resampled on its own, §4.4 summaries).
A row of ``study.json`` carries such an estimate as ``"estimate": {"mean", "ci95", "method"}``.
"""
import numpy as np

from countermem_jax.protocol import intervals

_ALPHA = (1.0 - intervals.CONFIDENCE) / 2


def _interval(point: float, replicates: np.ndarray, method: str) -> dict:
    replicates = replicates[np.isfinite(replicates)]
    lo, hi = (np.quantile(replicates, [_ALPHA, 1 - _ALPHA]) if replicates.size
              else (float("nan"), float("nan")))
    return {"mean": float(point), "ci95": [float(lo), float(hi)], "method": method}


def reduction_per_solved(base_counts, base_solved, mem_counts, mem_solved,
                         seed: int = intervals.BOOTSTRAP_SEED, groups=None) -> dict:
    """(Σ base counts / Σ base solved) − (Σ memory counts / Σ memory solved) over the same
    tasks (positive = fewer calls or failures per solved task with memory); the CI resamples
    reference groups (``groups``, one key per entry) where given, else the entries, keeping each
    task's base and memory outcomes together. None when a side solves nothing (the ratio is
    undefined)."""
    arrays = [np.asarray(a, np.float64) for a in (base_counts, base_solved, mem_counts,
                                                   mem_solved)]
    bc, bs, mc, ms = arrays
    if bs.sum() == 0 or ms.sum() == 0:
        return None
    point = bc.sum() / bs.sum() - mc.sum() / ms.sum()
    codes, n_units = intervals.group_codes(groups, len(bc))
    # Each unit's sums (a task's own values without groups), drawn with replacement.
    bc, bs, mc, ms = (np.bincount(codes, weights=a, minlength=n_units) for a in arrays)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_units, size=(intervals.N_RESAMPLES, n_units))
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = bc[draws].sum(1) / bs[draws].sum(1) - mc[draws].sum(1) / ms[draws].sum(1)
    unit = "task" if groups is None else f"reference-group ({n_units} groups)"
    return _interval(point, reps, f"paired {unit} bootstrap of the ratio difference, "
                     f"{intervals.N_RESAMPLES} resamples, numpy seed {seed} (resamples where a "
                     "side solved nothing are left out)")


def weighted_mean(parts: list, weights: list | None = None, groups: list | None = None) -> dict:
    """Weighted mean (equal weights by default) of parts, each a [runs × tasks] matrix of
    per-task values; the CI is a stratified bootstrap (each part resampled on its own seed, the
    replicates combined with the same weights). ``groups``: per part, its tasks' reference
    groups (one key per task column) or None; a part with groups draws them whole."""
    weights = np.full(len(parts), 1.0 / len(parts)) if weights is None else \
        np.asarray(weights, np.float64) / np.sum(weights)
    points = np.array([np.asarray(p, np.float64).mean() for p in parts])
    groups = groups or [None] * len(parts)
    reps = np.stack([intervals.bootstrap_means(np.asarray(p, np.float64),
                                               seed=intervals.BOOTSTRAP_SEED + i, groups=g)
                     for i, (p, g) in enumerate(zip(parts, groups))])
    unit = ("" if all(g is None for g in groups) else
            " (runs, then reference groups)" if all(g is not None for g in groups) else
            " (runs, then reference groups where known, else tasks)")
    return _interval(float(weights @ points), weights @ reps,
                     f"stratified two-level bootstrap{unit} over {len(parts)} weighted parts, "
                     f"{intervals.N_RESAMPLES} resamples, numpy seeds from "
                     f"{intervals.BOOTSTRAP_SEED}")


def domain_weights(domain_of: list) -> list:
    """Weights giving every domain the same total weight, split equally among its parts."""
    counts = {d: domain_of.count(d) for d in set(domain_of)}
    return [1.0 / (len(counts) * counts[d]) for d in domain_of]
