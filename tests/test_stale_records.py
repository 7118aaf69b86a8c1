"""Records retired when their world changes (issue 38, item 2; docs/method.md "Stale records").

A record carries the checker version and the environment digest (the SQLite file's sha256) it
was verified under; retrieval refuses it once either changed, counts it, ``inspect_store``
lists it, and ``reverify_store`` keeps the records that still hold and retires the rest. The
library tests run on a real SQLite file (``helpers.people_benchmark``) that they change; the
binaries run on the Spider data, which they only read.
"""
import dataclasses
import json
import os
import pathlib
import sqlite3
import subprocess
import sys

import pytest

from countermem_jax.method import reverify
from countermem_jax.method.memory import MemoryStore, load_store, save_store
from countermem_jax.method.memory.record import MemoryRecord, RecordFieldError, WorldStamp
from countermem_jax.method.memory.world import WorldCheck, stamp
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.protocol.metrics import run_metrics
from evaluators.sql import SQLEvaluator
from helpers import make_record, paper, people_benchmark

REPO = pathlib.Path(__file__).resolve().parents[1]
QUESTIONS = {"p1": ("People aged 50 or more", ">= 50"), "p2": ("People over 30", "> 30")}


@pytest.fixture
def people(tmp_path):
    """(tasks by id, evaluator, database path) over a real SQLite file this test may change."""
    tasks, evaluator, _ = people_benchmark(tmp_path, QUESTIONS)
    return {t.task_id: t for t in tasks}, evaluator, pathlib.Path(tasks[0].reference.db_path)


def _add_row(db: pathlib.Path, name: str, age: int) -> None:
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO people VALUES (?, ?)", (name, age))
    conn.commit()
    conn.close()


def _stamped(task, evaluator, original, improved, situation="people above an age threshold"):
    """A record of ``task`` verified now: its evidence is what the checker says of both actions,
    its stamp the checker and database of now."""
    record = make_record(source_task_id=task.task_id, situation=situation, original=original,
                         improved=improved, condition="")
    evidence, why = reverify.check_again(record, task, evaluator, 0.05)
    assert why == "", why   # the contrast holds on the data as it is
    return dataclasses.replace(record, evidence=evidence, verified_under=stamp(evaluator, task))


def _query(task_id="p2"):
    return TaskFacts(task_id=task_id, text="people above an age threshold")


def test_a_row_added_to_the_database_makes_a_record_stale_and_retrieval_refuses_it(people):
    tasks, evaluator, db = people
    record = _stamped(tasks["p1"], evaluator, "SELECT name FROM people WHERE age > 50",
                      "SELECT name FROM people WHERE age >= 50")
    before = RetrievalIndex([record], world=WorldCheck(evaluator, tasks.values())).retrieve(_query())
    assert [c.record for c in before.candidates] == [record] and before.excluded_stale == ()
    _add_row(db, "Hal", 48)
    check = WorldCheck(evaluator, tasks.values())
    assert check(record).startswith("environment people changed (sha256:")
    after = RetrievalIndex([record], world=check).retrieve(_query())
    assert not after.covered and after.excluded_stale == (record.record_id,)
    assert after.eligible_count == 0 and after.excluded_condition == ()


def test_a_changed_checker_version_makes_a_record_stale_and_retrieval_refuses_it(people):
    tasks, evaluator, _ = people
    record = _stamped(tasks["p1"], evaluator, "SELECT name FROM people WHERE age > 50",
                      "SELECT name FROM people WHERE age >= 50")
    newer = SQLEvaluator()
    newer.version = "3+sqlite-next"
    check = WorldCheck(newer, tasks.values())
    assert check(record) == f"checker version {evaluator.version} → 3+sqlite-next"
    result = RetrievalIndex([record], world=check).retrieve(_query())
    assert not result.covered and result.excluded_stale == (record.record_id,)


def test_stale_records_are_refused_under_the_random_intervention_and_their_conditions_unjudged(
        people):
    tasks, evaluator, _ = people
    stale = dataclasses.replace(
        _stamped(tasks["p1"], evaluator, "SELECT name FROM people WHERE age > 50",
                 "SELECT name FROM people WHERE age >= 50"),
        verified_under=WorldStamp("0"), condition="the request is about people")
    index = RetrievalIndex([stale], world=WorldCheck(evaluator, tasks.values()),
                           intervention="random")
    result = index.retrieve(_query())
    assert not result.covered and result.excluded_stale == (stale.record_id,)
    assert index.visible_records("p2") == []   # so no judge is asked about its condition


def test_a_record_without_a_stamp_is_never_stale_and_keeps_its_json(people):
    tasks, evaluator, db = people
    old = make_record(source_task_id="p1", condition="")
    assert "verified_under" not in old.to_json()
    _add_row(db, "Hal", 48)
    check = WorldCheck(evaluator, tasks.values())
    assert check(old) == "" and check.status(old).kind == "unstamped"
    assert RetrievalIndex([old], world=check).retrieve(_query()).covered


def test_a_stamp_round_trips_and_a_bad_one_is_named(people):
    tasks, evaluator, _ = people
    record = _stamped(tasks["p1"], evaluator, "SELECT name FROM people WHERE age > 50",
                      "SELECT name FROM people WHERE age >= 50")
    obj = record.to_json()
    assert obj["verified_under"] == {"checker_version": evaluator.version,
                                     "environment": evaluator.environment_digest(tasks["p1"])}
    assert MemoryRecord.from_json(obj) == record
    with pytest.raises(RecordFieldError, match="verified_under.environment"):
        MemoryRecord.from_json({**obj, "verified_under": {"checker_version": "1",
                                                          "environment": 3}})
    with pytest.raises(RecordFieldError, match="verified_under.when"):
        MemoryRecord.from_json({**obj, "verified_under": {"checker_version": "1", "when": "x"}})


def test_stale_refusals_are_counted_in_the_run_metrics():
    decisions = [{"task_id": "a", "memory": {"covered": False, "excluded_stale": ["r1", "r2"]}},
                 {"task_id": "b", "memory": {"covered": True, "excluded_stale": ["r1"]}},
                 {"task_id": "c", "memory": {"covered": True}}]   # logged before the count
    ends = [{"task_id": t, "solved": True, "calls": 1, "failures": 0, "tokens": 1}
            for t in "abc"]
    assert run_metrics(ends, decisions)["stale_refusals"] == 3


def test_reverify_keeps_a_record_that_still_holds_and_retires_one_that_does_not(people, tmp_path):
    tasks, evaluator, db = people
    holds = _stamped(tasks["p1"], evaluator, "SELECT name FROM people WHERE age > 50",
                     "SELECT name FROM people WHERE age >= 50")
    # right on the old rows only: "age > 45" answers "age >= 50" while nobody is 46 to 49
    fails = _stamped(tasks["p1"], evaluator, "SELECT name FROM people WHERE age > 55",
                     "SELECT name FROM people WHERE age > 45", situation="a threshold moved")
    unstamped = make_record(source_task_id="p2", condition="")
    store = MemoryStore(paper("store"))
    for record in (holds, fails, unstamped):
        store.propose(record)
    assert len(store) == 3
    frozen = save_store(store.freeze(), tmp_path / "store.jsonl")
    before = frozen.read_bytes()
    _add_row(db, "Hal", 48)
    # a new process's checker: nothing cached from before the change
    check = WorldCheck(SQLEvaluator(), tasks.values())
    new, verdicts = reverify.reverify(load_store(frozen), check)
    assert [(v.record_id, v.status) for v in verdicts] == [
        (holds.record_id, "kept"), (fails.record_id, "retired"), (unstamped.record_id,
                                                                   "unstamped")]
    assert "does not exceed ε" in verdicts[1].detail
    assert [r.record_id for r in new.records] == [holds.record_id, unstamped.record_id]
    kept = new.get(holds.record_id)
    assert check(kept) == "" and kept.verified_under == check.current(holds)
    assert kept.insertion_seq == store.get(holds.record_id).insertion_seq
    assert new.meta["retired"][0]["record"] == store.get(fails.record_id).to_json()
    assert new.meta["retired"][0]["why"].startswith("environment people changed")
    out = save_store(new, tmp_path / "reverified.jsonl")
    assert load_store(out).content_hash() == new.content_hash()
    assert frozen.read_bytes() == before   # the input store is never rewritten
    assert RetrievalIndex(new.records, world=check).retrieve(_query()).excluded_stale == ()


def test_reverify_under_a_new_checker_version_restamps_what_still_holds(people):
    tasks, evaluator, _ = people
    record = _stamped(tasks["p1"], evaluator, "SELECT name FROM people WHERE age > 50",
                      "SELECT name FROM people WHERE age >= 50")
    newer = SQLEvaluator()
    newer.version = "3+sqlite-next"
    new, verdicts = reverify.reverify(MemoryStore(paper("store"), records=[record]),
                                      WorldCheck(newer, tasks.values()))
    assert verdicts[0].status == "kept" and "checker version" in verdicts[0].why
    assert new.records[0].verified_under.checker_version == "3+sqlite-next"


def test_reverify_checks_unstamped_records_only_when_asked(people):
    tasks, evaluator, _ = people
    old = make_record(source_task_id="p1", original="SELECT name FROM people WHERE age > 50",
                      improved="SELECT name FROM people WHERE age >= 50", condition="")
    check = WorldCheck(evaluator, tasks.values())
    same, verdicts = reverify.reverify(MemoryStore(paper("store"), records=[old]), check)
    assert verdicts[0].status == "unstamped" and same.records == (old,)
    stamped, verdicts = reverify.reverify(MemoryStore(paper("store"), records=[old]), check,
                                          include_unstamped=True)
    assert verdicts[0].status == "kept"
    assert stamped.records[0].verified_under == stamp(evaluator, tasks["p1"])


# ---------------------------------------------------------------- the binaries, on Spider data
CPU_CONFIG = "--config=configs/spider_react_cpu.py"
SPIDER_TASK = "spider/pets_1/45"   # gold: SELECT count(*) FROM pets WHERE weight  >  10


def _run(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def _spider_store(tmp_path) -> tuple[pathlib.Path, dict]:
    """A frozen store of three records of one Spider task: one verified in today's world, one
    under checker version "1" whose edit holds, one in another database state whose edit
    never held."""
    from countermem_jax.domains import load_benchmark
    from helpers import config_without_model
    tasks, evaluator, _ = load_benchmark(config_without_model(
        REPO / "configs/spider_react_cpu.py").data)
    task = next(t for t in tasks if t.task_id == SPIDER_TASK)
    wrong = "SELECT count(*) FROM pets WHERE weight > 100"
    records = {
        "current": dataclasses.replace(
            make_record(source_task_id=SPIDER_TASK, situation="a weight bound", original=wrong,
                        improved="SELECT count(*) FROM pets WHERE weight > 10", condition=""),
            verified_under=stamp(evaluator, task)),
        "old_checker": dataclasses.replace(
            make_record(source_task_id=SPIDER_TASK, situation="pets heavier than ten",
                        original=wrong, improved="SELECT count(*) FROM pets WHERE 10 < weight",
                        condition=""),
            verified_under=WorldStamp("1", stamp(evaluator, task).environment)),
        "old_data": dataclasses.replace(
            make_record(source_task_id=SPIDER_TASK, situation="count every pet",
                        original=wrong, improved="SELECT count(*) FROM pets", condition=""),
            verified_under=WorldStamp(evaluator.version, "sha256:" + "0" * 64)),
    }
    store = MemoryStore(paper("store"))
    for record in records.values():
        store.propose(record)
    assert len(store) == 3
    return save_store(store.freeze(), tmp_path / "store.jsonl"), records


def test_inspect_store_lists_the_stale_records_with_why(tmp_path, benchdata):
    path, records = _spider_store(tmp_path)
    out = _run("countermem_jax.inspect_store", f"--store={path}", CPU_CONFIG)
    assert out.returncode == 0, out.stderr
    assert "1 current, 2 stale, 0 unstamped" in out.stdout
    assert (f"STALE {records['old_checker'].record_id}  from {SPIDER_TASK}: checker version 1 → "
            "2+sqlite") in out.stdout
    assert (f"STALE {records['old_data'].record_id}  from {SPIDER_TASK}: environment pets_1 "
            "changed (sha256:000000000000…") in out.stdout
    assert f"STALE {records['current'].record_id}" not in out.stdout
    plain = _run("countermem_jax.inspect_store", f"--store={path}")
    assert "3 records stamped" in plain.stdout and "STALE" not in plain.stdout


def test_reverify_store_keeps_what_holds_retires_the_rest_and_keeps_the_input(tmp_path, benchdata):
    path, records = _spider_store(tmp_path)
    before = path.read_bytes()
    out_path = tmp_path / "reverified.jsonl"
    out = _run("countermem_jax.reverify_store", CPU_CONFIG, f"--store={path}",
               f"--out={out_path}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1].startswith("re-verified 2 of 3 records: 1 kept, 1 retired; unchanged: "
                                "1 current")
    assert any(line.startswith(f"kept     {records['old_checker'].record_id}") for line in lines)
    assert any(line.startswith(f"retired  {records['old_data'].record_id}") for line in lines)
    new = load_store(out_path)
    assert [r.record_id for r in new.records] == [records["current"].record_id,
                                                  records["old_checker"].record_id]
    header = json.loads(out_path.read_text().splitlines()[0])
    assert [r["record"]["record_id"] for r in header["meta"]["retired"]] == [
        records["old_data"].record_id]
    assert path.read_bytes() == before
    again = _run("countermem_jax.inspect_store", f"--store={out_path}", CPU_CONFIG)
    assert "2 current, 0 stale" in again.stdout


@pytest.mark.parametrize("case", ["out_exists", "out_is_the_store", "store_missing"])
def test_reverify_store_refuses_bad_paths_in_one_line(case, tmp_path):
    store = save_store(MemoryStore(paper("store"), records=[make_record()]).freeze(), tmp_path / "store.jsonl")
    other = tmp_path / "other.jsonl"
    other.write_text("kept\n")
    before = store.read_bytes()
    args = {"out_exists": (store, other),
            "out_is_the_store": (store, store),
            "store_missing": (tmp_path / "none.jsonl", tmp_path / "new.jsonl")}[case]
    out = _run("countermem_jax.reverify_store", CPU_CONFIG, f"--store={args[0]}",
               f"--out={args[1]}")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[-1].startswith("error: ") and len(lines) == 1, out.stderr
    assert store.read_bytes() == before and not (tmp_path / "new.jsonl").exists()
    assert other.read_text() == "kept\n"


def test_a_build_stamps_its_records_and_evaluation_after_a_data_change_refuses_them(tmp_path):
    """End to end (the scripted backbone, the real checker): construction stamps its record
    with the checker and the database it was verified on; a row added to that database before
    evaluation makes it stale, and the run refuses it at every decision and counts it."""
    from countermem_jax import experiment
    from countermem_jax.method.memory import load_frozen
    from countermem_jax.runtime.runlog import RunLog
    import test_pipeline as pipeline
    benchmark = people_benchmark(tmp_path, {t: (q, gold)
                                            for t, (q, gold, _) in pipeline.QUESTIONS.items()})
    tasks, evaluator, _ = benchmark
    cfg = pipeline._config(tmp_path)
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=pipeline.scripted(), benchmark=benchmark)
    record = load_frozen(wd / "store_frozen.jsonl").records[0]
    b1 = next(t for t in tasks if t.task_id == "b1")
    assert record.verified_under == stamp(evaluator, b1)
    _add_row(pathlib.Path(b1.reference.db_path), "Hal", 20)   # no question's answer changes
    result = experiment.evaluate(cfg, wd, backbone=pipeline.scripted(), benchmark=benchmark)
    decisions = [d for d in RunLog(wd / "eval" / "countermem-always_top1" / "log.jsonl")
                 .events("decision") if d.get("memory")]
    assert decisions and all(d["memory"]["excluded_stale"] == [record.record_id]
                             and d["memory"]["retrieved"] == [] for d in decisions)
    assert result["countermem"]["stale_refusals"] == len(decisions)
    assert result["paired"]["fixed"]["rescued"] == 0   # e1 is rescued by the fresh record
