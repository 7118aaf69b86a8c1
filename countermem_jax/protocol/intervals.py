"""Spread over selector seeds and reference groups: mean, standard deviation and 95% bootstrap
CIs (docs/protocol.md, "Evaluation and confidence intervals")."""
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

N_RESAMPLES = 10_000
BOOTSTRAP_SEED = 12345
CONFIDENCE = 0.95
_CHUNK = 500  # replicates per vectorised step (bounds memory for large task counts)
# Below this many reference groups with a discordant task the design effect is not estimated:
# the groups' largest (all tasks of a group moving together) is used.
MIN_DISCORDANT_GROUPS = 10
_BISECTIONS = 60  # halvings of [-1, 1] for the interval's ends (2^-60: below float precision)


def group_codes(groups: Sequence, n: int) -> tuple[np.ndarray, int]:
    """Each task's group as a code 0..G-1 (in order of first appearance) and G; ``None`` makes
    every one of the ``n`` tasks its own group."""
    if groups is None:
        return np.arange(n), n
    groups = list(groups)
    if len(groups) != n:
        raise ValueError(f"expected one group per task ({n}), got {len(groups)}")
    index: dict = {}
    codes = np.array([index.setdefault(g, len(index)) for g in groups], np.int64)
    return codes, len(index)


def bootstrap_means(values: np.ndarray, n_resamples: int = N_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED, groups: Sequence | None = None) -> np.ndarray:
    """Replicate means of a [seeds, tasks] matrix: seeds drawn with replacement, and one draw of
    reference groups (of tasks, without ``groups``) with replacement shared by the drawn seeds;
    a replicate's mean is over every task of the drawn groups.

    Returns ``n_resamples`` means (float64). The same ``seed`` always gives the same replicates,
    which is what makes every interval in a report reproducible.
    """
    values = np.asarray(values, np.float64)
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise ValueError(f"expected a non-empty [seeds, tasks] matrix, got shape {values.shape}")
    m, n = values.shape
    codes, g = group_codes(groups, n)
    sums = np.zeros((m, g))
    np.add.at(sums, (slice(None), codes), values)   # [seeds, groups] sums of the groups' tasks
    sizes = np.bincount(codes, minlength=g).astype(np.float64)
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n_resamples, _CHUNK):
        b = min(_CHUNK, n_resamples - start)
        seeds = rng.integers(0, m, size=(b, m))
        drawn = rng.integers(0, g, size=(b, g))
        # Fancy indexing gives a [b, m, g] block: replicate × drawn seed × drawn group.
        total = sums[seeds[..., None], drawn[:, None, :]].sum(axis=(1, 2))
        out.append(total / (m * sizes[drawn].sum(axis=1)))
    return np.concatenate(out)


def summarize(values: np.ndarray, n_resamples: int = N_RESAMPLES,
              seed: int = BOOTSTRAP_SEED, groups: Sequence | None = None) -> dict:
    """Mean, std over seeds and the 95% two-level bootstrap CI of a [seeds, tasks] matrix, the
    tasks drawn by reference group when ``groups`` (one key per task column) is given.

    Returns a JSON-ready dict: ``mean`` (same units as the matrix, e.g. score points),
    ``std`` (None with one seed), ``ci95`` = [lo, hi], the per-seed means, the matrix shape and
    the number of groups resampled, and ``method``, a sentence saying how the interval was
    computed, printed under every table so a figure always carries its provenance.
    """
    values = np.asarray(values, np.float64)
    per_seed = values.mean(axis=1)
    replicates = bootstrap_means(values, n_resamples, seed, groups)
    alpha = (1.0 - CONFIDENCE) / 2
    lo, hi = np.quantile(replicates, [alpha, 1.0 - alpha])
    n_groups = group_codes(groups, values.shape[1])[1]
    unit = "the shared tasks" if groups is None else f"the shared reference groups ({n_groups})"
    return {"mean": float(per_seed.mean()),
            "std": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else None,
            "ci95": [float(lo), float(hi)], "per_seed": [float(v) for v in per_seed],
            "seeds": int(values.shape[0]), "tasks": int(values.shape[1]),
            "groups": int(n_groups),
            "method": f"two-level percentile bootstrap (seeds, then {unit}), "
                      f"{n_resamples} resamples, numpy seed {seed}"}


def grouped_bootstrap(values, groups, *, n_resamples: int = N_RESAMPLES,
                      confidence: float = CONFIDENCE, seed: int = 0
                      ) -> tuple[float, float, float]:
    """(mean, low, high) of per-task ``values`` (e.g. 100 · solved) with a percentile bootstrap
    CI that resamples whole reference groups: ``groups[i]`` is task i's group, a group may hold
    several tasks (twins, or one task under several split seeds), and each drawn group brings all
    of them. Same units as ``values``; the same ``seed`` gives the same interval.

    Runs ``scipy.stats.bootstrap`` on the groups' (sum, size) pairs, paired, with the statistic
    Σ sums / Σ sizes: the mean over the tasks of the drawn groups. One group gives (mean, mean,
    mean): a single group carries no evidence of spread.
    """
    values = np.asarray(values, np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"expected a non-empty vector of per-task values, got {values.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    codes, g = group_codes(groups, values.size)
    sums = np.bincount(codes, weights=values, minlength=g)
    sizes = np.bincount(codes, minlength=g).astype(np.float64)
    mean = float(values.mean())
    if g < 2:
        return mean, mean, mean
    ci = scipy_stats.bootstrap(
        (sums, sizes), lambda s, c, axis: s.sum(axis=axis) / c.sum(axis=axis), paired=True,
        vectorized=True, n_resamples=n_resamples, confidence_level=confidence,
        method="percentile", rng=np.random.default_rng(seed)).confidence_interval
    return mean, float(ci.low), float(ci.high)


def grouped_paired_bootstrap(base, treated, groups, *, n_resamples: int = N_RESAMPLES,
                             confidence: float = CONFIDENCE, seed: int = 0
                             ) -> tuple[float, float, float]:
    """(mean of treated − base, low, high): the paired difference over the same tasks, with a
    percentile bootstrap CI that resamples whole reference groups (``grouped_bootstrap`` on the
    per-task differences, so a task's two outcomes, and all the tasks of a group, are drawn
    together). ``base``, ``treated`` and ``groups`` are aligned per task; units are the inputs'
    (e.g. 100 · solved gives percentage points)."""
    base, treated = np.asarray(base, np.float64), np.asarray(treated, np.float64)
    if base.shape != treated.shape or base.ndim != 1:
        raise ValueError(f"paired outcomes must be two equal vectors, got {base.shape}, "
                         f"{treated.shape}")
    return grouped_bootstrap(treated - base, groups, n_resamples=n_resamples,
                             confidence=confidence, seed=seed)


def tango_z(b, c, n, delta):
    """Tango's score statistic for the paired difference Δ = P(rescued) − P(broken) given
    ``b`` rescued and ``c`` broken of ``n`` pairs (arrays broadcast; counts may be fractional,
    as after a design effect). At Δ = 0 it is McNemar's (b − c) / √(b + c)."""
    b, c, n, delta = (np.asarray(x, np.float64) for x in (b, c, n, delta))
    a2 = 2.0 * n
    bb = -b - c + (2.0 * n - b + c) * delta
    cc = -c * delta * (1.0 - delta)
    # the restricted maximum-likelihood estimate of P(broken) under Δ (Tango 1998, eq. 4)
    q = (np.sqrt(np.maximum(bb * bb - 4.0 * a2 * cc, 0.0)) - bb) / (2.0 * a2)
    var = n * (2.0 * q + delta * (1.0 - delta))
    return (b - c - n * delta) / np.sqrt(np.maximum(var, 1e-300))


def tango_interval(b, c, n, confidence: float = CONFIDENCE):
    """(low, high) of Δ in [-1, 1]: the Δ whose score |Z| ≤ z (arrays broadcast); the ends are
    found by bisection, Z being decreasing in Δ."""
    b, c, n = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (b, c, n)))
    z = scipy_stats.norm.ppf(0.5 + confidence / 2.0)
    point = np.where(n > 0, (b - c) / np.where(n > 0, n, 1.0), 0.0)
    ends = []
    for target, lo, hi in ((z, -np.ones_like(point), point), (-z, point, np.ones_like(point))):
        for _ in range(_BISECTIONS):
            mid = (lo + hi) / 2.0
            above = tango_z(b, c, n, mid) > target
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        ends.append((lo + hi) / 2.0)
    return ends[0], ends[1]


def design_effect(diff, groups=None) -> np.ndarray | float:
    """The design effect of reference groups for the mean of per-task differences ``diff``
    ([tasks], or [replicates, tasks] for one per row; docs/protocol.md): cluster-robust over
    independent variance, in [1, Σ n_g² / n]; that upper end while fewer than
    ``MIN_DISCORDANT_GROUPS`` groups hold a discordant task."""
    diff = np.asarray(diff, np.float64)
    rows = np.atleast_2d(diff)
    n = rows.shape[1]
    codes, g = group_codes(groups, n)
    sizes = np.bincount(codes, minlength=g).astype(np.float64)
    largest = max(1.0, float((sizes ** 2).sum() / n))
    onehot = np.zeros((n, g))
    onehot[np.arange(n), codes] = 1.0
    sums = rows @ onehot                                    # [rows, groups]
    discordant = ((rows != 0) @ onehot > 0).sum(axis=1)
    mean = rows.mean(axis=1, keepdims=True)
    clustered = g / max(g - 1, 1) * ((sums - mean * sizes) ** 2).sum(axis=1) / n ** 2
    independent = ((rows - mean) ** 2).sum(axis=1) / (n * max(n - 1, 1))
    ratio = np.where(independent > 0, clustered / np.where(independent > 0, independent, 1), 1)
    out = np.where((discordant < MIN_DISCORDANT_GROUPS) | (g < 2),
                   largest, np.clip(ratio, 1.0, largest))
    return float(out[0]) if diff.ndim == 1 else out


def paired_score_intervals(diff, groups=None, confidence: float = CONFIDENCE):
    """(low, high) per row of per-task differences ``diff`` ([replicates, tasks] or [tasks],
    each in [-1, 1]): Tango's interval on the rescued and broken shares divided by the design
    effect of ``groups`` (docs/protocol.md)."""
    diff = np.asarray(diff, np.float64)
    if np.any(np.abs(diff) > 1.0 + 1e-9):
        raise ValueError("paired differences must lie in [-1, 1] (shares, not points)")
    deff = design_effect(diff, groups)
    rescued = np.clip(diff, 0.0, None).sum(axis=-1)
    broken = np.clip(-diff, 0.0, None).sum(axis=-1)
    return tango_interval(rescued / deff, broken / deff, diff.shape[-1] / deff, confidence)


def paired_score_interval(base, treated, groups=None, *, scale: float = 100.0,
                          confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean of treated − base, low, high) in the inputs' units (``paired_score_intervals``).
    Per-task outcomes lie in [0, ``scale``] (100 · solved, or its mean over selector seeds: a
    task's positive difference counts as that fraction of a rescued task, a negative one of a
    broken)."""
    base, treated = np.asarray(base, np.float64), np.asarray(treated, np.float64)
    if base.shape != treated.shape or base.ndim != 1 or base.size == 0:
        raise ValueError(f"paired outcomes must be two equal non-empty vectors, got "
                         f"{base.shape}, {treated.shape}")
    diff = (treated - base) / scale
    low, high = paired_score_intervals(diff, groups, confidence)
    return float(diff.mean() * scale), float(low * scale), float(high * scale)


def summarize_difference(values, groups: Sequence | None = None) -> dict:
    """``summarize``'s dict for a [seeds, tasks] matrix of paired differences (treated − base,
    100 · solved), its ``ci95`` the score interval (``paired_score_interval``) of the per-task
    mean over seeds, with the design effect it used."""
    values = np.asarray(values, np.float64)
    if values.ndim != 2 or values.size == 0:
        raise ValueError(f"expected a non-empty [seeds, tasks] matrix, got shape {values.shape}")
    per_seed, per_task = values.mean(axis=1), values.mean(axis=0)
    deff = design_effect(per_task / 100.0, groups)
    low, high = (100.0 * float(v) for v in paired_score_intervals(per_task / 100.0, groups))
    n_groups = group_codes(groups, values.shape[1])[1]
    return {"mean": float(per_seed.mean()),
            "std": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else None,
            "ci95": [low, high], "per_seed": [float(v) for v in per_seed],
            "seeds": int(values.shape[0]), "tasks": int(values.shape[1]),
            "groups": int(n_groups), "design_effect": round(deff, 3),
            "method": score_method(n_groups if groups is not None else None, deff)}


def score_method(n_groups: int | None, deff: float) -> str:
    """The sentence printed under a table for a score interval of a paired difference."""
    unit = f"{n_groups} reference groups" if n_groups is not None else "tasks as groups"
    return (f"Tango score interval for paired proportions, design effect {deff:.2f} for "
            f"{unit} (protocol/intervals.py)")
