"""The report binary: CIs that cover a known mean, paired tests with exact
p-values, refusal of runs that cannot be compared, a figure and CSV per kind of data, and the
binary on two real workdirs (CounterMem and ExpeL) made with the scripted backbone."""
import csv
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the report needs the plots extra (matplotlib)")
from countermem_jax import report  # noqa: E402
from countermem_jax.reporting import build, load, tables  # noqa: E402
from test_pipeline import people_benchmark  # noqa: F401,E402  (fixture)

REPO = pathlib.Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _workdir(root, method, runs, eval_ids, *, seeds=None, store_hash="s" * 64, agent="react",
             benchmark="bench", code_version=None, build_ids=("c1", "c2")):
    """A workdir as the three phases leave it, with chosen per-task outcomes.

    ``runs`` maps run name -> {task_id: solved} (or -> (seed, {task_id: solved}))."""
    root = pathlib.Path(root)
    root.mkdir(parents=True)
    (root / "splits.json").write_text(json.dumps(
        {"build": list(build_ids), "train": [], "validation": [], "eval": list(eval_ids)}))
    (root / "fingerprint.json").write_text(json.dumps({"build_memory": {
        "sha256": "f" * 64, "recorded_at": "2026-01-01T00:00:00+00:00",
        "fields": {"backbone.kind": "openai", "backbone.model": "gpt-oss-120b", "method": method,
                   "agent.kind": agent, "data.benchmark": benchmark}}}))
    if method == "countermem":
        (root / "store_frozen.sha256").write_text(store_hash + "\n")
    elif method != "none":
        (root / "baselines").mkdir()
        (root / "baselines" / f"{method}_frozen.jsonl.sha256").write_text(store_hash + "\n")
    metrics = {"benchmark": benchmark, "agent": agent, "method": method, "selector": "dqn",
               "runs": {r: str(root / "eval" / r) for r in runs}, "seeds": seeds or ["fixed"]}
    if code_version:
        metrics["code_version"] = code_version
    (root / "metrics.json").write_text(json.dumps(metrics))
    for run, outcome in runs.items():
        seed, outcome = outcome if isinstance(outcome, tuple) else (None, outcome)
        (root / "eval" / run).mkdir(parents=True)
        with open(root / "eval" / run / "log.jsonl", "w") as f:
            for task_id, solved in outcome.items():
                event = {"event": "task_end", "run": run, "phase": "evaluation",
                         "task_id": task_id, "solved": bool(solved), "calls": 2 - bool(solved),
                         "tokens": 100, "benchmark": benchmark, "domain": "sql"}
                if seed is not None:
                    event["seed"] = seed
                f.write(json.dumps(event) + "\n")
    return root


def _ids(n, prefix="e"):
    return [f"{prefix}{i:03d}" for i in range(n)]


def _outcomes(ids, solved):
    return {t: bool(s) for t, s in zip(ids, solved)}


# ----------------------------------------------------------------------------- intervals
def test_ci_covers_a_known_mean(tmp_path):
    """Cells with an exactly known mean sit in their CI; over many synthetic workdirs drawn at a
    known solve rate, the CIs (three seeds over 50 shared tasks) cover it about 95% of the time."""
    ids = _ids(30)
    exact = _workdir(tmp_path / "exact", "countermem", {
        "base": _outcomes(ids, [1] * 6 + [0] * 24),
        "countermem-dqn-seed0": (0, _outcomes(ids, [1] * 18 + [0] * 12))}, ids, seeds=["0"])
    arms, _ = load.load_all([exact])
    rows = {r["method"]: r for r in tables.scores(arms)}
    assert rows["CounterMem"]["mean"] == pytest.approx(60.0)
    assert rows["CounterMem"]["ci95_low"] < 60.0 < rows["CounterMem"]["ci95_high"]
    assert rows["None"]["ci95_low"] < 20.0 < rows["None"]["ci95_high"]
    assert 20 < rows["CounterMem"]["ci95_high"] - rows["CounterMem"]["ci95_low"] < 50
    assert not rows["CounterMem"]["few_tasks"]

    rng = np.random.default_rng(0)
    ids, covered, trials = _ids(50), 0, 40
    for k in range(trials):
        runs = {"base": _outcomes(ids, rng.random(50) < 0.3)}
        runs.update({f"countermem-dqn-seed{s}": (s, _outcomes(ids, rng.random(50) < 0.6))
                     for s in range(3)})
        wd = _workdir(tmp_path / f"draw{k}", "countermem", runs, ids, seeds=["0", "1", "2"])
        arms, _ = load.load_all([wd])
        row = next(r for r in tables.scores(arms) if r["method"] == "CounterMem")
        assert row["runs"] == 3 and row["tasks"] == 50
        covered += row["ci95_low"] <= 60.0 <= row["ci95_high"]
    assert covered >= 0.85 * trials, f"{covered}/{trials} CIs cover the true mean"


def test_paired_test_and_few_task_marker(tmp_path):
    """B better on 12 tasks and never worse: the exact sign-test p is 2 · 0.5**12; a cell on fewer
    than 20 tasks is marked."""
    ids = _ids(30)
    base = [0] * 30
    wd = _workdir(tmp_path / "wd", "expel",
                  {"base": _outcomes(ids, base), "expel": _outcomes(ids, [1] * 12 + [0] * 18)},
                  ids)
    arms, _ = load.load_all([wd])
    (diff,) = tables.differences(arms)
    assert (diff["method_a"], diff["method_b"]) == ("None", "ExpeL")
    assert diff["difference_b_minus_a"] == pytest.approx(40.0)
    assert diff["p_sign_test"] == pytest.approx(2 * 0.5 ** 12)
    assert diff["p_bootstrap"] < 0.001 and diff["ci95_low"] > 0
    (rb,) = tables.rescued_broken(arms)
    assert (rb["rescued_mean"], rb["broken_mean"]) == (12, 0)
    small = _workdir(tmp_path / "small", "expel", {"base": _outcomes(ids[:10], base),
                                                   "expel": _outcomes(ids[:10], [1] * 10)},
                     ids[:10], benchmark="other")
    arms, _ = load.load_all([small])
    assert all(r["few_tasks"] for r in tables.scores(arms))
    assert tables.cell(tables.scores(arms)[0]).endswith(tables.FEW_TASKS_MARK)


def test_domain_table_averages_benchmarks_and_keeps_backbones_apart(tmp_path):
    """Table 1's domain column is the equal-weight mean of its benchmarks (spider 40, bird 80 ->
    Text-to-SQL 60) with a CI around it; another backbone is its own group, not a mixed split."""
    spider, bird = _ids(20, "s"), _ids(40, "b")
    dirs = [_workdir(tmp_path / name, "expel", {"base": _outcomes(ids, [0] * len(ids)),
                                               "expel": _outcomes(ids, solved)}, ids,
                     benchmark=name)
            for name, ids, solved in (("spider", spider, [1] * 8 + [0] * 12),
                                      ("bird", bird, [1] * 32 + [0] * 8))]
    other = _workdir(tmp_path / "other", "expel", {"base": _outcomes(bird[:30], [0] * 30),
                                                   "expel": _outcomes(bird[:30], [0] * 30)},
                     bird[:30], benchmark="bird")
    fp = json.loads((other / "fingerprint.json").read_text())
    fp["build_memory"]["fields"]["backbone.model"] = "another-model"
    (other / "fingerprint.json").write_text(json.dumps(fp))
    arms, _ = load.load_all(dirs + [other])
    header, rows = tables.domain_table(arms)
    assert header == ["backbone", "agent", "method", "Text-to-SQL", "tokens (M)"]
    cells = {("another-model" if "another-model" in r[0] else "gpt-oss", r[2]): r[3] for r in rows}
    assert len(rows) == 4 and cells[("another-model", "ExpeL")].startswith("0.0 [0.0, 0.0]")
    mean, ci = cells[("gpt-oss", "ExpeL")].split(" [")
    low, high = (float(v) for v in ci.rstrip("]").split(", "))
    assert float(mean) == pytest.approx(60.0) and low < 60.0 < high and high - low < 40
    assert all("†" not in r[3] for r in rows)  # 20, 40 and 30 tasks


# ----------------------------------------------------------------------------- refusals
def _refused(capsys, dirs, out):
    assert report.main([str(d) for d in dirs] + ["--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert not out.exists()  # refused before anything is written
    return err


def test_runs_that_cannot_be_compared_are_refused(tmp_path, capsys):
    ids = _ids(25)
    runs = {"base": _outcomes(ids, [1] * 25), "expel": _outcomes(ids, [0] * 25)}
    a = _workdir(tmp_path / "a", "expel", runs, ids)
    other_split = ids[:24] + ["x999"]
    b = _workdir(tmp_path / "b", "countermem", {
        "base": _outcomes(other_split, [1] * 25),
        "countermem-dqn-seed0": (0, _outcomes(other_split, [1] * 25))}, other_split)
    err = _refused(capsys, [a, b], tmp_path / "out")
    assert f"{a} and {b}" in err and "held-out splits differ" in err and "x999" in err
    # The same method with another store cannot be pooled as further runs.
    c = _workdir(tmp_path / "c", "expel", runs, ids, store_hash="t" * 64)
    err = _refused(capsys, [a, c], tmp_path / "out")
    assert "store hashes differ" in err and str(c) in err
    # Recorded code versions that differ are refused; another agent is another comparison.
    d = _workdir(tmp_path / "d", "expel", runs, ids, code_version="v1")
    e = _workdir(tmp_path / "e", "generative_agents", runs | {"generative_agents": runs["expel"]},
                 ids, code_version="v2-dirty")
    assert "code versions differ (v1 vs v2-dirty)" in _refused(capsys, [d, e], tmp_path / "out")
    f = _workdir(tmp_path / "f", "expel", {"base": _outcomes(other_split, [1] * 25),
                                           "expel": _outcomes(other_split, [1] * 25)},
                 other_split, agent="reflexion")
    assert report.main([str(a), str(f), "--out", str(tmp_path / "ok")]) == 0
    shuffled = _workdir(tmp_path / "shuffled", "countermem", {  # the same ids in another order
        "base": _outcomes(ids[::-1], [1] * 25),
        "countermem-dqn-seed0": (0, _outcomes(ids[::-1], [1] * 25))}, ids[::-1])
    assert report.main([str(a), str(shuffled), "--out", str(tmp_path / "ok2")]) == 0
    # An unfinished evaluation and a directory that is not a workdir say so.
    g = _workdir(tmp_path / "g", "expel", {"base": _outcomes(ids[:5], [1] * 5),
                                           "expel": _outcomes(ids, [1] * 25)}, ids)
    assert "no result for 20 of 25 held-out tasks" in _refused(capsys, [g], tmp_path / "out")
    assert "no splits.json" in _refused(capsys, [tmp_path], tmp_path / "out")


# ----------------------------------------------------------------------------- outputs
def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_figure_and_csv_for_each_kind_of_data(tmp_path):
    ids = _ids(24)
    cm = _workdir(tmp_path / "cm", "countermem", {
        "base": _outcomes(ids, [1] * 12 + [0] * 12),
        "countermem-dqn-seed0": (0, _outcomes(ids, [1] * 10 + [0] * 2 + [1] * 6 + [0] * 6)),
        "countermem-dqn-seed1": (1, _outcomes(ids, [1] * 12 + [1] * 4 + [0] * 8))}, ids,
        seeds=["0", "1"])
    expel = _workdir(tmp_path / "expel", "expel", {"base": _outcomes(ids, [1] * 12 + [0] * 12),
                                                  "expel": _outcomes(ids, [1] * 24)}, ids)
    written = build.write_report([cm, expel], tmp_path / "out")
    for kind in ("scores", "differences", "rescued_broken", "cost"):
        assert written[f"{kind}.png"].read_bytes()[:8] == PNG_MAGIC
        assert _csv(written[f"{kind}.csv"]), kind
    assert len(_csv(written["provenance.csv"])) == 2
    rb = {r["method"]: r for r in _csv(written["rescued_broken.csv"])}
    assert float(rb["CounterMem"]["rescued_mean"]) == 5.0  # seeds: 6 and 4 rescued
    assert float(rb["CounterMem"]["broken_mean"]) == 1.0   # seeds: 2 and 0 broken
    assert float(rb["ExpeL"]["rescued_mean"]) == 12.0
    main = _csv(written["main_table.csv"])
    assert [r["method"] for r in main] == ["None", "ExpeL", "CounterMem"]
    assert [r["method"] for r in _csv(written["domain_table.csv"])] == [r["method"] for r in main]
    md = written["report.md"].read_text()
    for name in ("scores.png", "differences.png", "rescued_broken.png", "cost.png"):
        assert f"]({name})" in md
    assert "none (no trained selector)" in md  # neither synthetic workdir trained a selector
    assert "not recorded" in md and "gpt-oss-120b" in md
    # Only the base agent: its score and cost, and the report says nothing could be paired.
    none = _workdir(tmp_path / "none", "none", {"base": _outcomes(ids, [1] * 24)}, ids)
    written = build.write_report([none], tmp_path / "out_none")
    assert "differences.png" not in written and "rescued_broken.png" not in written
    assert "nothing to compare" in written["report.md"].read_text()


def test_binary_on_two_real_workdirs(tmp_path, people_benchmark):  # noqa: F811
    """A CounterMem workdir (two DQN seeds) and an ExpeL workdir made by the three phases with the
    scripted backbone: report.md has both rows, their paired p-value and their provenance."""
    from countermem_jax import experiment
    from helpers import default_config
    from test_baselines import scripted as baseline_scripted
    from test_pipeline import _config, scripted
    cm_cfg = _config(tmp_path, selector="dqn")
    expel_cfg = _config(tmp_path)
    expel_cfg.method, expel_cfg.baselines = "expel", default_config().baselines
    for cfg, wd, backbone in ((cm_cfg, tmp_path / "cm", scripted),
                              (expel_cfg, tmp_path / "expel", baseline_scripted)):
        for phase in (experiment.build_memory, experiment.train_selector, experiment.evaluate):
            phase(cfg, wd, backbone=backbone(), benchmark=people_benchmark)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "countermem_jax.report", str(tmp_path / "cm"),
                           str(tmp_path / "expel"), "--out", str(tmp_path / "report")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| ReAct | ExpeL | " in md and "| ReAct | CounterMem | " in md
    row = next(line for line in md.splitlines()
               if line.startswith("| ReAct | people | ExpeL | CounterMem |"))
    p_bootstrap, p_sign = (float(v) for v in row.strip("| ").split(" | ")[-2:])
    assert 0 < p_bootstrap <= 1 and 0 < p_sign <= 1
    store_hash = (tmp_path / "cm" / "store_frozen.sha256").read_text().strip()
    selector = json.loads((tmp_path / "cm" / "selector" / "fingerprints.json").read_text())
    assert store_hash in md and selector["0"]["fingerprint"] in md
    assert (tmp_path / "expel" / "baselines" / "expel_frozen.jsonl.sha256").read_text().strip() in md
    assert "†" in md  # two held-out tasks
