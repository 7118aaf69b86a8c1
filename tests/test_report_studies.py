"""The report on study directories: CIs over runs and units cover a known mean, a
study of another split or code version is refused naming both, and every one of the eleven
studies (both study.json schemas) gets its figure, CSV and report.md section."""
import csv
import json
import pathlib

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the report needs the plots extra (matplotlib)")
from countermem_jax import report  # noqa: E402
from countermem_jax.reporting import build, studies  # noqa: E402
from countermem_jax.reporting.load import ReportError  # noqa: E402
from test_report import _ids, _outcomes, _workdir  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROW_STUDIES = ("accumulation", "transfer", "rescued", "budget", "breakdown")
VARIANT_STUDIES = ("components", "retrieval", "condition_removal", "retention", "harm",
                   "selectors")


def _rows_study(root, name="accumulation", *, values=None, code_version="v1", eval_ids=None,
                methods=("CounterMem", "ReasoningBank"), xs=(0, 25, 50)):
    """A countermem-study-rows/1 study.json: numeric x (a line panel) and a labelled panel
    (bars) with an estimate row, per method."""
    eval_ids = list(eval_ids or _ids(30))
    rng = np.random.default_rng(0)
    rows = []
    for method in methods:
        for x in xs:
            v = values if values is not None else \
                (rng.random((3, len(eval_ids))) < 0.5).astype(float) * 100
            rows.append({"panel": "a", "title": "held-out score", "metric": "score",
                         "ylabel": "score", "method": method, "x": x,
                         "values": np.asarray(v).tolist(), "runs": ["o0", "o1", "o2"],
                         "units": "tasks", "unit_ids": eval_ids})
        rows.append({"panel": "b", "title": "summary", "metric": "gain", "ylabel": "pp",
                     "method": method, "x": "four-domain", "values": None, "runs": [],
                     "units": "benchmarks", "unit_ids": None,
                     "estimate": {"mean": 3.0, "ci95": [1.0, 5.0], "method": "test"}})
        rows.append({"panel": "b", "title": "summary", "metric": "gain", "ylabel": "pp",
                     "method": method, "x": "12-benchmark", "values": None, "runs": [],
                     "units": "benchmarks", "unit_ids": None, "estimate": None})
    root = pathlib.Path(root)
    root.mkdir(parents=True)
    (root / "study.json").write_text(json.dumps({
        "schema": studies.ROWS_SCHEMA, "study": name, "title": name, "paper": "§x",
        "code_version": code_version, "splits_hash": "h" + "".join(eval_ids),
        "eval_task_ids": eval_ids, "benchmark": "spider", "agent": "react",
        "backbone": "fake", "config": {}, "notes": ["a note"], "workdirs": {}, "rows": rows}))
    return root


def _summary(mean, tasks=30):
    return {"mean": mean, "std": None, "ci95": [mean - 5, mean + 5], "per_seed": [mean],
            "seeds": 1, "tasks": tasks, "method": "test"}


def _variant_study(root, name, code_version="v1"):
    """A countermem-study/1 study.json (the variant studies' schema) with two variants."""
    ids = _ids(30)
    rng = np.random.default_rng(1)
    variants = {}
    for v, p in (("none", 0.3), ("matched", 0.6)):
        per_task = {s: {t: int(x) for t, x in zip(ids, rng.random(30) < p)}
                    for s in ("base", "0")}
        variants[v] = {"label": v, "overrides": {}, "workdir": str(root / v), "seeds": ["0"],
                       "per_task": per_task, "score": _summary(100 * p),
                       "score_vs_base": _summary(5.0), "score_change": _summary(2.0),
                       "metrics": {"harmful_use_rate": 0.1, "calls_per_solved": None},
                       "base_metrics": {"calls_per_solved": 2.0},
                       "by_task_kind": {"ordinary": {"harmful_use_rate": 0.05},
                                        "look_alike": {"harmful_use_rate": 0.3}}}
    root = pathlib.Path(root)
    root.mkdir(parents=True)
    (root / "study.json").write_text(json.dumps({
        "schema": studies.VARIANT_SCHEMA, "study": name, "title": name, "paper": "§6",
        "code_version": code_version, "benchmark": "spider", "agent": "react",
        "backbone": "fake", "eval_task_ids": ids, "reference": "none", "variants": variants,
        "figures": [{"panel": "a", "title": "score change", "kind": "bar",
                     "variants": list(variants), "value": "score_change", "unit": "pp"},
                    {"panel": "b", "title": "harm", "kind": "bar", "variants": list(variants),
                     "value": "metrics.harmful_use_rate", "unit": "rate"},
                    {"panel": "c", "title": "calls", "kind": "bar", "variants": list(variants),
                     "value": "metrics.calls_per_solved", "unit": "calls",
                     "baseline": "base_metrics.calls_per_solved"},
                    {"panel": "d", "title": "by kind", "kind": "grouped_bar",
                     "variants": list(variants), "unit": "rate",
                     "values": ["by_task_kind.ordinary.harmful_use_rate",
                                "by_task_kind.look_alike.harmful_use_rate"]}]}))
    return root


def test_study_ci_covers_a_known_mean(tmp_path):
    """Rows drawn at a known solve rate (3 orderings × 40 tasks): the CIs cover it in about
    95% of 100 synthetic studies, and an exactly known mean sits inside its CI."""
    exact = np.tile([100.0] * 12 + [0.0] * 18, (3, 1))   # 40% in every ordering
    rows = studies.rows(studies.load(_rows_study(tmp_path / "exact", values=exact)))
    row = next(r for r in rows if r["x"] == 0)
    assert row["mean"] == pytest.approx(40.0) and row["ci95_low"] < 40.0 < row["ci95_high"]
    rng = np.random.default_rng(7)
    covered = 0
    for i in range(100):
        values = (rng.random((3, 40)) < 0.3).astype(float) * 100
        record = {"schema": studies.ROWS_SCHEMA, "study": "s", "rows": [{
            "panel": "a", "title": "t", "metric": "score", "method": "m", "x": 0,
            "values": values.tolist(), "runs": ["a", "b", "c"], "units": "tasks"}]}
        r = studies.rows(record)[0]
        covered += r["ci95_low"] <= 30.0 <= r["ci95_high"]
    assert 88 <= covered <= 100


def test_study_rows_flag_few_units_and_keep_undefined_estimates(tmp_path):
    rows = studies.rows(studies.load(_rows_study(tmp_path / "s", eval_ids=_ids(10))))
    assert all(r["few_tasks"] for r in rows if r["metric"] == "score")
    undefined = [r for r in rows if r["x"] == "12-benchmark"]
    assert undefined and all(r["mean"] is None for r in undefined)


def test_paired_tests_between_methods_on_the_same_tasks(tmp_path):
    ids = _ids(30)
    a = np.zeros((1, 30))
    b = np.zeros((1, 30))
    b[0, :10] = 100.0   # B solves 10 more tasks
    root = _rows_study(tmp_path / "s", values=a, xs=(0,), eval_ids=ids)
    record = json.loads((root / "study.json").read_text())
    record["rows"][0]["values"], record["rows"][0]["runs"] = a.tolist(), ["o0"]
    second = next(r for r in record["rows"] if r["method"] == "ReasoningBank" and r["x"] == 0)
    second["values"], second["runs"] = b.tolist(), ["o0"]
    (root / "study.json").write_text(json.dumps(record))
    diff = studies.differences(studies.load(root))
    assert len(diff) == 1
    assert diff[0]["difference_b_minus_a"] == pytest.approx(100.0 * 10 / 30)
    assert diff[0]["p_sign_test"] == pytest.approx(2 * 0.5 ** 10)


def test_a_study_with_another_split_is_refused(tmp_path):
    one = _rows_study(tmp_path / "one", eval_ids=_ids(30))
    two = _rows_study(tmp_path / "two", eval_ids=_ids(30, "x"))
    with pytest.raises(ReportError, match="held-out splits differ"):
        build.write_report([one, two], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_another_code_version_is_refused_naming_both(tmp_path, capsys):
    one = _rows_study(tmp_path / "one", code_version="abc1234")
    two = _variant_study(tmp_path / "two", "retrieval", code_version="def5678-dirty")
    assert report.main([str(one), str(two), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "code versions differ (abc1234 vs def5678-dirty)" in err
    assert str(one) in err and str(two) in err
    # the same holds between a workdir's recorded version and a study's
    ids = _ids(30)
    wd = _workdir(tmp_path / "wd", "countermem", {"base": _outcomes(ids, [1] * 30),
                                                  "countermem-dqn-seed0": (0, _outcomes(
                                                      ids, [1] * 30))}, ids, seeds=["0"],
                  code_version="abc1234")
    with pytest.raises(ReportError, match=r"code versions differ \(abc1234 vs def5678-dirty\)"):
        build.write_report([wd, two], tmp_path / "out2")


def test_every_study_gets_a_figure_csv_and_section(tmp_path):
    dirs = [_rows_study(tmp_path / n, n) for n in ROW_STUDIES]
    dirs += [_variant_study(tmp_path / n, n) for n in VARIANT_STUDIES]
    written = build.write_report(dirs, tmp_path / "out")
    md = written["report.md"].read_text()
    for name in ROW_STUDIES + VARIANT_STUDIES:
        png = tmp_path / "out" / f"study_{name}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC
        assert f"![{name}](study_{name}.png)" in md
        with open(tmp_path / "out" / f"study_{name}.csv") as f:
            assert len(list(csv.DictReader(f))) >= 2
    with open(tmp_path / "out" / "study_condition_removal.csv") as f:
        grouped = [r for r in csv.DictReader(f) if r["panel"] == "d"]
    assert len(grouped) == 4 and {r["mean"] for r in grouped} == {"0.05", "0.3"}
    # variant studies: a paired test of each variant against the base agent's run
    with open(tmp_path / "out" / "study_retrieval_differences.csv") as f:
        assert {r["method_b"] for r in csv.DictReader(f)} == {"none", "matched"}
