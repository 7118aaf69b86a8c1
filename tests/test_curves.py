"""The run's curves (TensorBoard event files under WORKDIR/curves) are written by the three
phases and read back with what the run recorded elsewhere (store, best.json, run logs)."""
import csv
import json

import pytest

from countermem_jax.runtime import curves
from countermem_jax import experiment
from countermem_jax.method.memory import load_frozen
from countermem_jax.runtime.runlog import RunLog
from test_pipeline import _config, people_benchmark, scripted  # noqa: F401  (fixture)


@pytest.fixture
def ran(tmp_path, people_benchmark):  # noqa: F811
    cfg = _config(tmp_path, selector="dqn")
    wd = tmp_path / "wd"
    for phase in (experiment.build_memory, experiment.train_selector, experiment.evaluate):
        phase(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    return wd


def test_construction_curves_follow_the_committed_tasks(ran):
    got = curves.read_scalars(ran / "curves" / "construction")
    assert [s for s, _ in got["construction/records"]] == [1, 2]   # two construction tasks
    assert got["construction/records"][-1][1] == len(load_frozen(ran / "store_frozen.jsonl"))
    assert got["construction/tokens"][-1][1] > got["construction/tokens"][0][1] > 0
    assert 0 < got["construction/verified_share"][-1][1] <= 1
    assert got["construction/parse_failures"] and got["construction/truncations"]


@pytest.mark.parametrize("seed", [0, 1])
def test_selector_curves_hold_every_checkpoints_validation_return(ran, seed):
    got = curves.read_scalars(ran / "curves" / "selector" / f"seed_{seed}")
    best = json.loads((ran / "selector" / f"seed_{seed}" / "best.json").read_text())
    assert got["validation/return"] == [(int(k), pytest.approx(v))
                                        for k, v in best["val_returns"].items()]
    eps = [v for _, v in got["train/epsilon"]]
    assert eps == sorted(eps, reverse=True) and eps[0] < 1.0
    assert got["train/loss"] and got["train/mean_q"]


def test_evaluation_curves_end_at_each_runs_score(ran):
    for run in ("base", "countermem-dqn-seed0", "countermem-dqn-seed1"):
        got = curves.read_scalars(ran / "curves" / "eval" / run)["eval/running_score"]
        ends = RunLog(ran / "eval" / run / "log.jsonl").events("task_end")
        assert [s for s, _ in got] == [1, 2]
        assert got[-1][1] == pytest.approx(sum(e["solved"] for e in ends) / len(ends))


def test_a_rewritten_step_keeps_its_last_value(tmp_path):
    for value in (0.25, 0.75):   # a resumed run writes the step again, in a newer file
        writer = curves.CurveWriter(tmp_path)
        writer.scalars(250, {"validation/return": value, "train/loss": float("nan")})
        writer.close()
    assert curves.read_scalars(tmp_path) == {"validation/return": [(250, 0.75)]}


def test_the_report_draws_the_learning_curve_from_the_curves(ran, tmp_path):
    from countermem_jax.reporting import build
    written = build.write_report([ran], tmp_path / "report")
    with open(written["learning_curve.csv"]) as f:
        rows = list(csv.DictReader(f))
    for seed in (0, 1):
        best = json.loads((ran / "selector" / f"seed_{seed}" / "best.json").read_text())
        mine = [r for r in rows if r["seed"] == str(seed)]
        assert [(int(r["decisions"]), float(r["validation_return"])) for r in mine] == \
            [(int(k), pytest.approx(v)) for k, v in best["val_returns"].items()]
        assert {r["source"] for r in mine} == {"curves"}
    assert written["learning_curve.png"].stat().st_size > 0
    assert "## Selector learning curve" in written["report.md"].read_text()
