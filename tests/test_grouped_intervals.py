"""Intervals resample reference groups, not tasks (issue 36 item 4): paraphrase twins share one
gold query, so they are one unit of evidence; a bootstrap that draws them one by one is too narrow.
"""
import json

import numpy as np
import pytest

from countermem_jax.protocol import intervals, metrics


def _twins(n_groups=12, size=3, seed=0):
    """Per-task outcomes where every group's tasks agree (twins), the groups drawn at random."""
    per_group = (np.random.default_rng(seed).random(n_groups) < 0.5) * 100.0
    return np.repeat(per_group, size), np.repeat(np.arange(n_groups), size), per_group


def test_grouped_bootstrap_draws_groups_whole():
    values, groups, per_group = _twins()
    grouped = intervals.grouped_bootstrap(values, groups)
    # Three identical copies of a group are worth one group: the interval is exactly that of the
    # groups alone, and wider than the task bootstrap that counts every copy as evidence.
    assert grouped == intervals.grouped_bootstrap(per_group, None)
    by_task = intervals.grouped_bootstrap(values, None)
    assert grouped[0] == by_task[0] == pytest.approx(values.mean())
    assert grouped[2] - grouped[1] > by_task[2] - by_task[1]


def test_a_group_whose_tasks_average_out_has_no_spread():
    """Each group holds one solved and one failed task: every replicate that draws whole groups
    has mean 50, while drawing tasks would spread the mean."""
    values = np.array([0.0, 100.0] * 10)
    groups = np.repeat(np.arange(10), 2)
    assert intervals.grouped_bootstrap(values, groups) == (50.0, 50.0, 50.0)
    _, lo, hi = intervals.grouped_bootstrap(values, None)
    assert lo < 50.0 < hi


def test_grouped_paired_bootstrap_is_the_difference_in_input_units_and_seeded():
    base, groups, _ = _twins(seed=1)
    treated = base.copy()
    treated[groups == 0] = 100.0 - treated[groups == 0]   # one group of three flips
    diff, lo, hi = intervals.grouped_paired_bootstrap(base, treated, groups, seed=3)
    assert diff == pytest.approx((treated - base).mean())
    assert lo <= diff <= hi
    assert intervals.grouped_paired_bootstrap(base, treated, groups, seed=3) == (diff, lo, hi)
    assert (intervals.grouped_paired_bootstrap(base, treated, groups, seed=3, confidence=0.5)
            != (diff, lo, hi))
    # Group labels of any type, and a group that repeats the same task under several split seeds
    names = [f"car_1:{g}" for g in groups]
    assert intervals.grouped_paired_bootstrap(base, treated, names, seed=3) == (diff, lo, hi)
    with pytest.raises(ValueError):
        intervals.grouped_paired_bootstrap(base, treated[:-1], groups)
    with pytest.raises(ValueError):
        intervals.grouped_bootstrap(base, groups[:-1])


def test_one_group_gives_a_point_interval():
    assert intervals.grouped_bootstrap([0.0, 100.0, 100.0], ["g"] * 3) == pytest.approx(
        (200 / 3, 200 / 3, 200 / 3))


def test_two_level_summary_draws_groups_and_without_groups_draws_tasks():
    values, groups, per_group = _twins()
    matrix = np.stack([values, np.roll(values, 3)])       # two selector seeds
    plain = intervals.summarize(matrix)
    assert plain["groups"] == matrix.shape[1] and "shared tasks" in plain["method"]
    grouped = intervals.summarize(matrix, groups=groups)
    assert grouped["groups"] == 12 and "reference groups (12)" in grouped["method"]
    assert grouped["mean"] == plain["mean"]
    assert grouped["ci95"][1] - grouped["ci95"][0] > plain["ci95"][1] - plain["ci95"][0]
    # one seed with identical twins: the groups' own interval
    assert intervals.summarize(values[None], groups=groups)["ci95"] == \
        intervals.summarize(per_group[None])["ci95"]


def test_seed_aggregate_bootstraps_the_score_difference_over_groups():
    """Evaluation's aggregate resamples the groups it is given, and records them per task."""
    ids = [f"t{i:02d}" for i in range(20)]
    group_of = {t: f"g{i // 2}" for i, t in enumerate(ids)}   # ten pairs of twins
    base = [{"task_id": t, "solved": False, "calls": 1, "failures": 1, "tokens": 1} for t in ids]
    mem = [dict(e, solved=i % 2 == 0) for i, e in enumerate(base)]
    grouped = metrics.seed_aggregate(base, {"0": mem}, {"0": []}, group_of=group_of)
    plain = metrics.seed_aggregate(base, {"0": mem}, {"0": []})
    assert grouped["score_difference"]["ci95"] == [50.0, 50.0]   # every pair: one rescued
    assert plain["score_difference"]["ci95"][0] < 50.0 < plain["score_difference"]["ci95"][1]
    assert grouped["per_task"]["groups"] == [group_of[t] for t in ids]


def test_summary_standard_error_counts_groups_not_tasks():
    from countermem_jax.protocol import summaries
    values, groups, per_group = _twins()
    # singletons: the binomial error of ``score``; triplicated twins: the groups' own error
    alone = summaries.grouped_mean(per_group, None)
    assert alone.se == pytest.approx(summaries.score(int(per_group.sum() / 100), 12).se)
    twins = summaries.grouped_mean(values, groups)
    assert twins.se == pytest.approx(alone.se)
    assert summaries.grouped_mean(values, None).se < twins.se


def test_summaries_read_the_per_task_groups_of_a_metrics_file(tmp_path):
    from countermem_jax.protocol import summaries
    base, groups, _ = _twins(seed=2)
    treated = np.where(groups % 4 == 0, 100.0, base)
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({
        "agent": "react", "benchmark": "spider",
        "base": {"solved": int(base.sum() / 100), "tasks": base.size},
        "countermem": {"solved": float(treated.sum() / 100), "tasks": base.size},
        "aggregate": {"per_task": {"groups": [f"g{g}" for g in groups], "base": base.tolist(),
                                   "treated": [treated.tolist()]}}}))
    gain = summaries.from_metrics([path])["react"]["gain"]["spider"]
    assert gain == summaries.grouped_mean(treated - base, groups)
    assert gain.se > summaries.grouped_mean(treated - base, None).se
