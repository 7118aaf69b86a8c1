"""Studies 5–9 end to end with the scripted backbone and the real SQL checker at
small sizes: each writes a study.json whose rows the report can read."""
import json

import numpy as np
import pytest

from countermem_jax.studies import accumulation, cells
from study_fixtures import make_benchmark, scripted, small_config, study_config


@pytest.fixture
def bench(tmp_path):
    return make_benchmark(tmp_path)


def _rows(record, **match):
    return [r for r in record["rows"] if all(r[k] == v for k, v in match.items())]


def test_accumulation_snapshots_share_one_selector(tmp_path, bench):
    cfg = study_config("accumulation", small_config(n_build=8, n_eval=3), checkpoints=(0, 2, 4),
                       orderings=2, ordering_seed=0, methods=("countermem", "reasoningbank"),
                       regression_tasks=2)
    record = accumulation.run(cfg, tmp_path / "study", backbone=scripted(), benchmark=bench)
    saved = json.loads((tmp_path / "study" / "study.json").read_text())
    assert saved["study"] == "accumulation" and saved["code_version"]
    score = _rows(record, panel="a", method="CounterMem")
    assert [r["x"] for r in score] == [0, 2, 4]
    assert all(np.shape(r["values"]) == (2, 3) for r in score)
    assert all(len(r["unit_groups"]) == 3 for r in score)  # the evaluation's reference groups
    # the empty store changes nothing; after source tasks the inclusive-bound record rescues
    assert np.mean(score[0]["values"]) < np.mean(score[-1]["values"])
    # one selector: every CounterMem snapshot holds the same checkpoint files
    fps = {(tmp_path / "study" / "cells" / "countermem" / f"order{o}" / f"n{n}" / "selector" /
            "fingerprints.json").read_text() for o in range(2) for n in (0, 2, 4)}
    assert len(fps) == 1
    assert len(_rows(record, panel="c")) == 2 * 2  # checkpoints 2 and 4, both methods
    tokens = _rows(record, panel="b", method="CounterMem")
    assert tokens[0]["values"] == [[0.0], [0.0]] and tokens[-1]["values"][0][0] > 0
    # run again on the same directory: every phase resumes as finished, the numbers stay
    again = accumulation.run(cfg, tmp_path / "study", backbone=scripted(), benchmark=bench)
    assert again["rows"] == record["rows"]


def test_rescued_broken_per_method_against_its_own_base_run(tmp_path, bench):
    from countermem_jax.studies import rescued
    cfg = study_config("rescued", small_config(), benchmarks=("spider",),
                       methods=("countermem", "reasoningbank"), n_paired=5)
    record = rescued.run(cfg, tmp_path / "study", backbone=scripted(), benchmark=bench)
    by = {(r["method"], r["metric"]): r for r in record["rows"]}
    cm = {m: float(np.mean(by[("CounterMem", m)]["values"])) for m in ("rescued", "broken", "net")}
    assert len(by[("CounterMem", "net")]["unit_ids"]) == 5
    assert len(by[("CounterMem", "net")]["unit_groups"]) == 5
    assert cm["net"] == cm["rescued"] - cm["broken"] and cm["rescued"] >= 1
    # the counts equal the phases' own paired metrics
    metrics = json.loads((tmp_path / "study" / "cells" / "spider" / "countermem" /
                          "metrics.json").read_text())
    assert metrics["paired"]["0"]["rescued"] == cm["rescued"]
    # every phase records the code version it ran with (provenance.code_version)
    from countermem_jax.protocol import provenance
    cell = tmp_path / "study" / "cells" / "spider" / "countermem"
    recorded = json.loads((cell / "fingerprint.json").read_text())
    assert metrics["code_version"] == provenance.code_version() == record["code_version"]
    assert {recorded[p]["code_version"] for p in ("build_memory", "train_selector")} == \
        {provenance.code_version()}
    assert ("ReasoningBank", "net") in by


def test_breakdown_gains_reductions_and_summaries(tmp_path, bench):
    from countermem_jax.studies import breakdown
    cfg = study_config("breakdown", small_config(), benchmarks=("spider",),
                       agents=("react", "reflexion"))
    record = breakdown.run(cfg, tmp_path / "study", backbone=scripted(), benchmark=bench)
    gain = {r["method"]: r for r in record["rows"] if r["metric"] == "score_gain"}
    assert set(gain) == {"ReAct", "Reflexion"} and np.mean(gain["ReAct"]["values"]) > 0
    # the cells' evaluations recorded the tasks' reference groups; the intervals draw them
    assert len(gain["ReAct"]["unit_groups"]) == len(gain["ReAct"]["unit_ids"])
    calls = [r for r in record["rows"] if r["metric"] == "call_reduction"]
    assert len(calls) == 2 and all(r["estimate"] is None or len(r["estimate"]["ci95"]) == 2
                                   for r in calls)
    summary = {(r["method"], r["x"]): r["estimate"] for r in record["rows"] if r["panel"] == "d"}
    # one Text-to-SQL benchmark: both summaries equal its gain, and say what is missing
    assert summary[("ReAct", "12-benchmark")]["mean"] == pytest.approx(
        np.mean(gain["ReAct"]["values"]))
    assert any("missing: Math, Coding, SAT" in n for n in record["notes"])


def test_report_draws_a_real_study(tmp_path, bench):
    """A rescued/broken study made by the phases goes through the report binary."""
    from countermem_jax import report
    from countermem_jax.studies import rescued
    cfg = study_config("rescued", small_config(), benchmarks=("spider",),
                       methods=("countermem",), n_paired=4)
    rescued.run(cfg, tmp_path / "study", backbone=scripted(), benchmark=bench)
    assert report.main([str(tmp_path / "study"), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "![rescued](study_rescued.png)" in md and "†" in md  # 4 tasks < 20
    assert (tmp_path / "out" / "study_rescued.png").read_bytes()[:4] == b"\x89PNG"


def test_undo_edit_inverts_the_records_edit_once():
    from countermem_jax.studies.transfer import undo_edit
    original, improved = "SELECT a FROM t WHERE x > 3", "SELECT a FROM t WHERE x >= 3"
    assert undo_edit("SELECT b FROM u WHERE y >= 7", original, improved) == \
        "SELECT b FROM u WHERE y > 7"
    assert undo_edit("SELECT b FROM u WHERE y >= 7 OR z >= 1", original, improved) is None
    assert undo_edit("SELECT b FROM u WHERE y < 7", original, improved) is None
    # a dropped token (a deletion) is anchored on its neighbour
    assert undo_edit("SELECT DISTINCT a FROM t", "SELECT a FROM t", "SELECT DISTINCT a FROM t") \
        == "SELECT a FROM t"


def test_transfer_four_conditions_with_checked_look_alikes(tmp_path, bench):
    from countermem_jax.studies import transfer
    cfg = study_config("transfer", small_config(n_build=8, n_eval=8),
                       methods=("countermem", "reasoningbank"), n_pairs=3, pair_seed=0)
    record = transfer.run(cfg, tmp_path / "study", backbone=scripted(), benchmark=bench)
    pairs = json.loads((tmp_path / "study" / "cells" / "pairs" / "pairs.json").read_text())
    assert set(pairs) == set(transfer.CONDITIONS)
    by_id = {t.task_id: t for t in bench[0]}
    for src, tgt, _ in pairs["same_environment"]:
        assert by_id[src].environment == by_id[tgt].environment
    for src, tgt, _ in pairs["new_environment"] + pairs["new_surface"]:
        assert by_id[src].environment != by_id[tgt].environment
    assert pairs["look_alike"], record["notes"]
    for src, tgt, request in pairs["look_alike"]:
        assert "strictly above" in request and tgt.startswith(src + "~lookalike~")
    rows = {(r["x"], r["method"], r["metric"]): r for r in record["rows"]}
    look = transfer.CONDITIONS["look_alike"]
    # the stored condition (bound == inclusive) is false on every look-alike target: retrieval
    # filters the record, so CounterMem is never covered there and never harms
    assert np.mean(rows[(look, "CounterMem", "coverage")]["values"]) == 0.0
    assert np.mean(rows[(look, "CounterMem", "success")]["values"]) == 100.0
    # ReasoningBank's strategy has no condition: it is applied and breaks the strict request
    assert np.mean(rows[(look, "ReasoningBank", "coverage")]["values"]) == 100.0
    assert np.mean(rows[(look, "ReasoningBank", "success")]["values"]) == 0.0
    same = transfer.CONDITIONS["same_environment"]
    assert np.mean(rows[(same, "CounterMem", "success")]["values"]) >= \
        np.mean(rows[(same, "no memory", "success")]["values"])


def test_budget_allocates_construction_and_solving_tokens(tmp_path, bench):
    from countermem_jax.studies import budget
    cfg = study_config("budget", small_config(n_build=8, n_eval=4), benchmarks=("spider",),
                       methods=("reasoningbank", "reasoningbank_matts", "countermem"),
                       token_budget=5000, construction_fraction=0.5)
    record = budget.run(cfg, tmp_path / "study", backbone=scripted(), benchmark=bench)
    assert "2,500 construction + 2,500 solving" in record["notes"][0]
    used = {}
    for note in record["notes"][1:]:
        label, rest = note.split(": ", 1)
        used[label.split(" ", 1)[1]] = int(rest.split(" of ")[0])
        tokens = int(rest.split("(")[1].split(" tokens")[0].replace(",", ""))
        assert tokens <= 2500
    # MaTTS spends k rollouts per construction task: fewer tasks fit its share
    assert used["ReasoningBank+MaTTS"] < used["ReasoningBank"]
    assert {r["method"] for r in record["rows"] if r["panel"] == "b"} == {
        "ReasoningBank", "ReasoningBank+MaTTS", "CounterMem"}
    assert budget.within_budget({"a": {"tokens": 10, "solved": True},
                                 "b": {"tokens": 10, "solved": True}}, ["a", "b"], 15) == \
        ([100.0, 0.0], 15, 1)


def test_protocol_dispatch_refuses_bad_input_before_running(tmp_path, bench):
    from countermem_jax.phases import config_validation
    from countermem_jax.studies import protocols
    cfg = study_config("accumulatoin", small_config(), checkpoints=(0,))
    with pytest.raises(config_validation.ConfigError, match="'accumulatoin' is not one of"):
        protocols.run(cfg, tmp_path / "s", backbone=scripted(), benchmark=bench)
    cfg = study_config("accumulation", small_config(), checkpoints=(0, 50), orderings=1,
                       ordering_seed=0, methods=("countermem",), regression_tasks=1)
    with pytest.raises(cells.StudyError, match="checkpoints go up to 50 source tasks"):
        protocols.run(cfg, tmp_path / "s", backbone=scripted(), benchmark=bench)
    assert not (tmp_path / "s" / "cells").exists()
