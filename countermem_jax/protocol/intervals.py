"""Spread over selector seeds: mean, standard deviation and a 95% bootstrap confidence interval.

The protocol trains and evaluates one selector per seed (paper Appendix C.2, Table 3: seeds 0–4),
so a score is a [seeds × tasks] matrix of per-task values (100 · solved, or the paired difference
to the base agent on the same task). ``summarize`` reports the mean over seeds of the per-seed
means, their standard deviation (ddof = 1; none with one seed) and a two-level percentile
bootstrap CI: each of ``n_resamples`` replicates draws the seeds with replacement and, inside the
drawn seeds, the tasks with replacement, and takes the mean. Every seed ran the same held-out
tasks, so one draw of task indices is shared by the drawn seeds of a replicate (seeds and tasks
are crossed, not nested: more seeds do not pretend to be more tasks). The generator is seeded,
so the same matrix always gives the same interval. With one seed the interval is a plain task
bootstrap. A paired difference is bootstrapped on the per-task differences, so the base and
CounterMem outcomes of one task are always drawn together.
"""
import numpy as np

N_RESAMPLES = 10_000
BOOTSTRAP_SEED = 12345
CONFIDENCE = 0.95
_CHUNK = 500  # replicates per vectorised step (bounds memory for large task counts)


def bootstrap_means(values: np.ndarray, n_resamples: int = N_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Replicate means of a [seeds, tasks] matrix: seeds drawn with replacement, and one draw of
    tasks with replacement shared by the drawn seeds.

    Returns ``n_resamples`` means (float64). The same ``seed`` always gives the same replicates,
    which is what makes every interval in a report reproducible.
    """
    values = np.asarray(values, np.float64)
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise ValueError(f"expected a non-empty [seeds, tasks] matrix, got shape {values.shape}")
    m, n = values.shape
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n_resamples, _CHUNK):
        b = min(_CHUNK, n_resamples - start)
        seeds = rng.integers(0, m, size=(b, m))
        tasks = rng.integers(0, n, size=(b, n))
        # Fancy indexing gives a [b, m, n] block: replicate × drawn seed × drawn task.
        out.append(values[seeds[..., None], tasks[:, None, :]].mean(axis=(1, 2)))
    return np.concatenate(out)


def summarize(values: np.ndarray, n_resamples: int = N_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> dict:
    """Mean, std over seeds and the 95% two-level bootstrap CI of a [seeds, tasks] matrix.

    Returns a JSON-ready dict: ``mean`` (same units as the matrix, e.g. score points),
    ``std`` (None with one seed), ``ci95`` = [lo, hi], the per-seed means, the matrix shape, and
    ``method``, a sentence saying how the interval was computed, printed under every table so a
    figure always carries its provenance.
    """
    values = np.asarray(values, np.float64)
    per_seed = values.mean(axis=1)
    replicates = bootstrap_means(values, n_resamples, seed)
    alpha = (1.0 - CONFIDENCE) / 2
    lo, hi = np.quantile(replicates, [alpha, 1.0 - alpha])
    return {"mean": float(per_seed.mean()),
            "std": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else None,
            "ci95": [float(lo), float(hi)], "per_seed": [float(v) for v in per_seed],
            "seeds": int(values.shape[0]), "tasks": int(values.shape[1]),
            "method": f"two-level percentile bootstrap (seeds, then the shared tasks), "
                      f"{n_resamples} resamples, numpy seed {seed}"}
