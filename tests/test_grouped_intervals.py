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


def test_seed_aggregate_gives_the_score_difference_a_design_effect_for_groups():
    """Evaluation's aggregate counts the groups it is given (twins rescued together are one
    piece of evidence: a wider interval than the same tasks as independent ones), and records
    them per task."""
    ids = [f"t{i:02d}" for i in range(20)]
    group_of = {t: f"g{i // 2}" for i, t in enumerate(ids)}   # ten pairs of twins
    base = [{"task_id": t, "solved": False, "calls": 1, "failures": 1, "tokens": 1} for t in ids]
    mem = [dict(e, solved=i < 4) for i, e in enumerate(base)]   # two pairs rescued whole
    grouped = metrics.seed_aggregate(base, {"0": mem}, {"0": []}, group_of=group_of)
    plain = metrics.seed_aggregate(base, {"0": mem}, {"0": []})
    g, p = grouped["score_difference"], plain["score_difference"]
    assert g["mean"] == p["mean"] == 20.0
    assert g["design_effect"] == 2.0 and p["design_effect"] == 1.0
    assert g["ci95"][0] < p["ci95"][0] < 20.0 < p["ci95"][1] < g["ci95"][1]
    assert "Tango" in g["method"]
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


def _clustered_replicates(expected: float, up: float, reps: int, seed: int):
    """[reps, tasks] per-task differences (shares) over 60 reference groups of 1–3 tasks whose
    tasks move together: each group is discordant with the chance that gives ``expected``
    discordant tasks, rescued with chance ``up``; and the true mean difference."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, 60)
    codes = np.repeat(np.arange(60), sizes)
    p = min(1.0, expected / sizes.sum())
    sign = np.where(rng.random((reps, 60)) < up, 1.0, -1.0) * (rng.random((reps, 60)) < p)
    return sign[:, codes], codes, p * (2 * up - 1)


@pytest.mark.parametrize("up", [0.5, 0.8, 1.0])
def test_the_paired_score_interval_keeps_coverage_with_few_clustered_events(up):
    """Nominal 95 %: at least 93 % of intervals hold the true difference, for 0–10 expected
    discordant tasks over 60 groups whose tasks are rescued or broken together."""
    for expected in range(11):
        diff, codes, truth = _clustered_replicates(expected, up, 2000, seed=expected)
        low, high = intervals.paired_score_intervals(diff, codes)
        covered = np.mean((low <= truth + 1e-12) & (truth - 1e-12 <= high))
        assert covered >= 0.93, (expected, up, covered)


def test_one_rescued_task_does_not_bound_the_difference_at_zero():
    """The percentile bootstrap's +0.8 [+0.0, +2.5] with 1 rescued and 0 broken: every replicate
    is >= 0. The score interval reaches below zero and above what one task shows."""
    base = np.zeros(120)
    treated = np.r_[100.0, np.zeros(119)]
    groups = np.arange(120) // 2
    assert intervals.grouped_paired_bootstrap(base, treated, groups)[1] == 0.0
    mean, low, high = intervals.paired_score_interval(base, treated, groups)
    assert mean == pytest.approx(100 / 120) and low < 0.0 and high > 2.5


def test_the_design_effect_is_that_of_whole_groups_with_few_discordant_groups():
    """Two tasks per group and a single discordant group: the design effect is Σ n_g² / n = 2,
    the interval that of 60 independent pairs; with tasks as groups it is 1."""
    diff = np.r_[1.0, 1.0, np.zeros(118)]
    assert intervals.design_effect(diff, np.arange(120) // 2) == pytest.approx(2.0)
    assert intervals.design_effect(diff, None) == 1.0
    grouped = intervals.paired_score_intervals(diff, np.arange(120) // 2)
    halved = intervals.tango_interval(1.0, 0.0, 60.0)
    assert np.allclose(grouped, halved)


def test_tango_z_is_mcnemar_at_zero():
    assert intervals.tango_z(7, 2, 100, 0.0) == pytest.approx(5 / np.sqrt(9))
