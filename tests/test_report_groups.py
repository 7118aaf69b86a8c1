"""The report's intervals resample reference groups where the workdir recorded them (issue 36
item 4): paraphrase twins that share one gold query are one unit of evidence, so a table over
identical twins is that of the groups alone, wider than one counting every twin; a workdir whose
metrics.json predates ``aggregate.per_task`` reports exactly as before, over tasks."""
import json

import numpy as np
import pytest
from scipy import stats as scipy_stats

pytest.importorskip("matplotlib", reason="the report needs the plots extra (matplotlib)")
from countermem_jax.protocol import intervals  # noqa: E402
from countermem_jax.reporting import build, domain_studies, load, studies, tables  # noqa: E402
from countermem_jax.studies import estimates  # noqa: E402
from test_report import _ids, _outcomes, _workdir  # noqa: E402

# 15 reference groups; which of them the base agent and ExpeL solve (a whole group at a time).
BASE = [1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0]
EXPEL = [1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0]


def _record_groups(wd, ids, groups):
    """Adds ``aggregate.per_task`` to the workdir's metrics.json as evaluation writes it."""
    path = wd / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics["aggregate"] = {"per_task": {"task_ids": list(ids), "groups": groups,
                                         "base": [], "treated": []}}
    path.write_text(json.dumps(metrics))


def _twin_workdir(root):
    """30 held-out tasks, each group of ``BASE``/``EXPEL`` twice (identical twins), groups
    recorded; returns the workdir, the task ids and their groups."""
    ids = _ids(30)
    groups = [f"g{i // 2:02d}" for i in range(30)]
    wd = _workdir(root, "expel", {"base": _outcomes(ids, np.repeat(BASE, 2)),
                                  "expel": _outcomes(ids, np.repeat(EXPEL, 2))}, ids)
    _record_groups(wd, ids, groups)
    return wd, ids, groups


def _by_method(rows, key="method"):
    return {r[key]: r for r in rows}


def test_identical_twins_count_once(tmp_path):
    """Every interval of the twin workdir counts groups: the same as a workdir holding one task
    per group, and wider than the same 30 twins taken as independent tasks (the difference's
    score interval with the groups' design effect, the scores' group bootstrap)."""
    wd, ids, groups = _twin_workdir(tmp_path / "twins")
    arms, provenances = load.load_all([wd])
    (diff,) = tables.differences(arms)
    per_task = 100.0 * (np.repeat(EXPEL, 2) - np.repeat(BASE, 2))
    grouped = intervals.summarize_difference(per_task[None], groups=groups)
    by_task = intervals.summarize_difference(per_task[None])
    assert [diff["ci95_low"], diff["ci95_high"]] == grouped["ci95"]
    assert diff["ci95_high"] - diff["ci95_low"] > by_task["ci95"][1] - by_task["ci95"][0]
    assert provenances[0].reference_groups == 15
    # The sign test stays per task: each of the 5 rescued groups is two tasks won.
    assert (diff["tasks_b_better"], diff["tasks_a_better"]) == (10, 0)
    assert diff["p_sign_test"] == pytest.approx(scipy_stats.binomtest(10, 10).pvalue)

    single_ids = _ids(15, "s")
    single = _workdir(tmp_path / "single", "expel", {"base": _outcomes(single_ids, BASE),
                                                     "expel": _outcomes(single_ids, EXPEL)},
                      single_ids)
    single_arms, _ = load.load_all([single])
    (one,) = tables.differences(single_arms)
    for key in ("difference_b_minus_a", "ci95_low", "ci95_high", "p_bootstrap"):
        assert diff[key] == pytest.approx(one[key]), key
    for mine, theirs in zip(tables.scores(arms), tables.scores(single_arms)):
        assert (mine["ci95_low"], mine["ci95_high"]) == pytest.approx(
            (theirs["ci95_low"], theirs["ci95_high"]))
    (rb,), (rb_one,) = tables.rescued_broken(arms), tables.rescued_broken(single_arms)
    assert rb["rescued_mean"] == 2 * rb_one["rescued_mean"] == 10
    assert (rb["rescued_ci95_low"], rb["rescued_ci95_high"]) == pytest.approx(
        (2 * rb_one["rescued_ci95_low"], 2 * rb_one["rescued_ci95_high"]))
    # The stratified domain table draws the same groups within the benchmark.
    assert tables.domain_table(arms)[1][1][3].split("]")[0] == \
        tables.domain_table(single_arms)[1][1][3].split("]")[0]

    md = build.write_report([wd], tmp_path / "out")["report.md"].read_text()
    assert "95% paired-bootstrap CI and two-sided p-value over reference groups" in md
    assert f"- `{wd}`: 15 reference groups of 30 held-out tasks" in md
    assert "per task even where groups are known" in md


def test_a_metrics_json_without_per_task_reports_as_before(tmp_path):
    """No ``aggregate.per_task``: the tasks are resampled, with the very draws the report made
    before groups were recorded (the figures below are those of the code before this change;
    the difference's CI is the score interval with tasks as groups, design effect 1), and the
    report says the unit was tasks."""
    ids = _ids(24)
    wd = _workdir(tmp_path / "cm", "countermem", {
        "base": _outcomes(ids, [1] * 12 + [0] * 12),
        "countermem-dqn-seed0": (0, _outcomes(ids, [1] * 10 + [0] * 2 + [1] * 6 + [0] * 6)),
        "countermem-dqn-seed1": (1, _outcomes(ids, [1] * 12 + [1] * 4 + [0] * 8))}, ids,
        seeds=["0", "1"])
    arms, provenances = load.load_all([wd])
    (diff,) = tables.differences(arms)
    assert (diff["difference_b_minus_a"], diff["ci95_low"], diff["ci95_high"],
            diff["p_bootstrap"], diff["p_sign_test"]) == pytest.approx(
        (50 / 3, -4.182803, 37.663749, 0.0648, 0.2890625), abs=1e-5)
    cm = _by_method(tables.scores(arms))["CounterMem"]
    assert (cm["ci95_low"], cm["ci95_high"]) == pytest.approx((47.916666666666664, 250 / 3))
    rb = _by_method(tables.rescued_broken(arms))["CounterMem"]
    assert (rb["rescued_ci95_low"], rb["rescued_ci95_high"], rb["broken_ci95_high"]) == \
        pytest.approx((1.0, 9.0, 4.0))
    assert provenances[0].reference_groups is None
    assert all(run.groups is None for arm in arms for run in arm.runs)
    md = build.write_report([wd], tmp_path / "out")["report.md"].read_text()
    assert "over tasks (the metrics.json has no `aggregate.per_task`" in md
    assert f"- `{wd}`: the 24 held-out tasks (no reference groups recorded)" in md
    # An evaluation that recorded per_task without groups is read the same way.
    _record_groups(wd, ids, None)
    again, _ = load.load_all([wd])
    assert tables.differences(again) == [diff]


def test_pooled_workdirs_share_the_recorded_groups():
    """Runs pooled from a workdir with groups and one without use the recorded groups; groupings
    that differ are merged, so tasks any workdir puts together are drawn together."""
    ids = ["a", "b", "c", "d"]
    run = lambda groups: load.Run("wd", "r", None, {}, None, groups)
    assert tables.task_groups([run(None), run(None)], ids) is None
    with_groups = run({"a": "x", "b": "x", "c": "y", "d": "z"})
    codes = tables.task_groups([run(None), with_groups], ids)
    assert codes[0] == codes[1] and len(set(codes)) == 3
    merged = tables.task_groups([with_groups, run({"a": "p", "b": "q", "c": "q", "d": "r"})],
                                ids)
    assert len(set(merged[:3])) == 1 and merged[3] not in merged[:3]


# ----------------------------------------------------------------------------- studies
def _twice(values):
    """Every task twice in a row (identical twins), as columns of a [runs × tasks] matrix."""
    return np.repeat(np.asarray(values, np.float64), 2, axis=-1)


def test_study_estimates_draw_twins_together():
    """A ratio difference and a stratified summary over identical twins with their groups are
    those of one task per group, draw for draw; without groups the twins would narrow them."""
    rng = np.random.default_rng(7)
    counts = [rng.integers(0, 6, 25), rng.random(25) < 0.5, rng.integers(0, 6, 25),
              rng.random(25) < 0.7]
    twins = [f"g{i // 2}" for i in range(50)]
    single = estimates.reduction_per_solved(*counts)
    grouped = estimates.reduction_per_solved(*(_twice(c) for c in counts), groups=twins)
    assert grouped["ci95"] == pytest.approx(single["ci95"])
    assert "reference-group (25 groups)" in grouped["method"]
    by_task = estimates.reduction_per_solved(*(_twice(c) for c in counts))
    assert by_task["ci95"][1] - by_task["ci95"][0] < single["ci95"][1] - single["ci95"][0]
    parts = [rng.random((2, 20)) * 100, rng.random((1, 30)) * 100]
    groups = [[f"a{i // 2}" for i in range(40)], [f"b{i // 2}" for i in range(60)]]
    summary = estimates.weighted_mean([_twice(p) for p in parts], [1, 3], groups)
    assert summary["ci95"] == pytest.approx(estimates.weighted_mean(parts, [1, 3])["ci95"])
    assert "reference groups" in summary["method"]


def _rows_record(root, values, ids, groups=None):
    rows = [{"panel": "a", "title": "score", "metric": "score", "ylabel": "score",
             "method": method, "x": 0, "values": np.asarray(v).tolist(), "runs": ["o0"],
             "units": "tasks", "unit_ids": ids} for method, v in zip(("A", "B"), values)]
    if groups is not None:
        for r in rows:
            r["unit_groups"] = groups
    root.mkdir(parents=True)
    (root / "study.json").write_text(json.dumps({
        "schema": studies.ROWS_SCHEMA, "study": "accumulation", "title": "t", "paper": "§x",
        "code_version": "v1", "eval_task_ids": ids, "rows": rows}))
    return studies.load(root)


def test_study_rows_and_variants_resample_recorded_groups(tmp_path):
    """A rows-schema study with ``unit_groups`` and a variant study with ``task_groups`` report
    the CIs and paired tests of one task per group; the Fig. 4 domain values the same."""
    a, b = np.array([BASE]) * 100.0, np.array([EXPEL]) * 100.0
    ids15, ids30 = _ids(15), _ids(30)
    twins = [f"g{i // 2:02d}" for i in range(30)]
    grouped = _rows_record(tmp_path / "grouped", [_twice(a), _twice(b)], ids30, twins)
    single = _rows_record(tmp_path / "single", [a, b], ids15)
    for mine, theirs in zip(studies.rows(grouped), studies.rows(single)):
        assert (mine["ci95_low"], mine["ci95_high"]) == pytest.approx(
            (theirs["ci95_low"], theirs["ci95_high"]))
    (diff,), (one,) = studies.differences(grouped), studies.differences(single)
    assert (diff["ci95_low"], diff["ci95_high"], diff["p_bootstrap"]) == pytest.approx(
        (one["ci95_low"], one["ci95_high"], one["p_bootstrap"]))
    assert diff["tasks_b_better"] == 2 * one["tasks_b_better"]  # the sign test counts tasks

    def variants(ids, base, mem, groups):
        entry = {"label": "v", "seeds": ["0"], "per_task": {
            "base": {t: int(x > 0) for t, x in zip(ids, base)},
            "0": {t: int(x > 0) for t, x in zip(ids, mem)}}}
        return {"v": {**entry, **({"task_groups": dict(zip(ids, groups))} if groups else {})}}
    record = {"schema": studies.VARIANT_SCHEMA, "study": "s", "reference": "none"}
    (vd,) = studies.differences({**record, "variants": variants(ids30, _twice(a)[0],
                                                                 _twice(b)[0], twins)})
    (vs,) = studies.differences({**record, "variants": variants(ids15, a[0], b[0], None)})
    assert (vd["ci95_low"], vd["ci95_high"]) == pytest.approx((vs["ci95_low"], vs["ci95_high"]))

    def sub(ids, groups, n):
        base = {t: [1, 0, 0, 0, 0] for t in ids}
        mem = {t: [1, int(i // n % 3 == 0), 0, 0, 0] for i, t in enumerate(ids)}
        return {"eval_task_ids": ids, "variants": {"full": {
            "per_task_counts": {"base": base, "0": mem},
            **({"task_groups": dict(zip(ids, groups))} if groups else {})}}}
    domain = {"study": "components", "domains": ["Text-to-SQL"], "agents": ["react"],
              "full": "full", "variants": {"full": "full"},
              "panels": [{"panel": "a", "title": "gain", "stats": ["gain"], "unit": "pp"}],
              "settings": [{"benchmark": "spider", "agent": "react", "status": "ran",
                            "domain": "Text-to-SQL", "dir": "spider"}]}
    (four, _), (four_one, _) = (domain_studies.estimates(domain, {("spider", "react"): s})
                                for s in (sub(ids30, twins, 2), sub(ids15, None, 1)))
    assert (four["mean"], four["ci95_low"], four["ci95_high"]) == pytest.approx(
        (four_one["mean"], four_one["ci95_low"], four_one["ci95_high"]))
    assert "reference-group bootstrap" in four["estimate_method"]
