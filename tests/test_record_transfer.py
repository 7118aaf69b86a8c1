"""Records that change the drafts they are used on (issue 36 item 3): the replay's place test in
retrieval, a correction carried to the same mistake in another question, transfer evidence
from construction's failed actions, replay_then_llm, repeating distilled situations, and the
uses that changed their draft in the evaluation metrics."""
import asyncio
import dataclasses
import types

import helpers
import pytest

from countermem_jax import experiment
from countermem_jax.method.agents import TaskContext as AgentTaskContext
from countermem_jax.method.counterfactual import repeats_itself, without_repeats
from countermem_jax.domains.sql_names import SQL_NAMES
from countermem_jax.method.edit_replay import place_test, record_fits, replay, replay_edit
from countermem_jax.method.memory import load_frozen
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.method.selector import policies
from countermem_jax.method.transfer_checks import FailedAction, failed_actions, transfer_checks
from countermem_jax.protocol import metrics
from countermem_jax.runtime.runlog import RunLog
from evaluators.base import Outcome, State, Task

BOUND = helpers.make_record(source_task_id="b1", condition="draft has [age]",
                            situation="an inclusive bound written as strict")
NO_LIMIT = helpers.make_record(source_task_id="b2", condition="draft has [age]",
                               situation="a row limit the question never asked for",
                               original="SELECT name FROM people WHERE age > 18 LIMIT 1",
                               improved="SELECT name FROM people WHERE age > 18")


def _query(draft, task_id="q"):
    return TaskFacts(task_id, "Names of people aged at least 40.", {}, draft=draft,
                     feedback="")


# -- a record is offered only where its edit has a place in the draft ---------------------------

def test_a_record_whose_replay_has_no_place_is_not_offered():
    draft = "SELECT name FROM people WHERE age > 40"     # no LIMIT: NO_LIMIT's edit has no place
    plain = RetrievalIndex([BOUND, NO_LIMIT]).retrieve(_query(draft))
    assert {c.record.record_id for c in plain.candidates} == {BOUND.record_id, NO_LIMIT.record_id}
    placed = RetrievalIndex([BOUND, NO_LIMIT], fits=record_fits).retrieve(_query(draft))
    assert [c.record.record_id for c in placed.candidates] == [BOUND.record_id]
    assert placed.excluded_no_place == (NO_LIMIT.record_id,) and placed.eligible_count == 1
    # outside a decision (no draft) nothing is left out
    assert len(RetrievalIndex([BOUND, NO_LIMIT], fits=record_fits).retrieve(
        _query(None)).candidates) == 2


class _Calls:
    """Module III's LLM calls, counted: the revision appends "-- llm" to the draft; ``names``
    the agent's domain's names hook (``MemoryCalls.names``)."""

    def __init__(self, names=None):
        self.revisions, self.names = [], names

    async def revise_with_record(self, ctx, draft, rendered):
        self.revisions.append(draft)
        return types.SimpleNamespace(ok=True, value=draft + " -- llm")


def _decide(records, draft, revision, fits=None, last=None, names=None):
    """One decision on ``draft``; ``last``: (action, feedback) of an earlier failed attempt."""
    task = Task("q", "sql", "spider", "Names of people aged at least 40.", "", "join / predicate",
                environment="people")
    state = State(task) if last is None else State(task).after(
        last[0], Outcome(0.0, False, True, last[1]))
    ctx = AgentTaskContext(task, "evaluation", "run", state, call_budget=3,
                           token_budget=10_000, max_decisions=3, decision=int(last is not None))
    calls = _Calls(names)
    index = RetrievalIndex(records, fits=fits)
    aug = CounterMemAugmentation(calls, index_source=lambda: index, revision=revision,
                                 selector=policies.make_fixed("always_top1"))
    return asyncio.run(aug.decide(ctx, draft)), calls


def test_the_decision_counts_a_held_condition_without_a_place_as_no_place():
    info, _ = _decide([NO_LIMIT], "SELECT name FROM people WHERE age > 40", "replay",
                      fits=record_fits)
    assert info.record_id is None and info.log["excluded_no_place"] == [NO_LIMIT.record_id]
    assert info.log["conditions"]["compatible"] == 0 and info.log["conditions"]["no_place"] == 1


def test_replay_then_llm_asks_the_model_only_where_the_replay_finds_no_place():
    info, calls = _decide([BOUND], "SELECT name FROM people WHERE age > 40", "replay_then_llm")
    assert info.action == "SELECT name FROM people WHERE age >= 40" and not calls.revisions
    assert info.log["revision"] == "replay"
    info, calls = _decide([BOUND], "SELECT name FROM people WHERE age < 40", "replay_then_llm")
    assert info.action.endswith("-- llm") and len(calls.revisions) == 1
    assert info.log["revision"] == "llm"
    # replay alone keeps the draft there; llm asks every time
    info, calls = _decide([BOUND], "SELECT name FROM people WHERE age < 40", "replay")
    assert info.action == "SELECT name FROM people WHERE age < 40" and not calls.revisions
    _, calls = _decide([BOUND], "SELECT name FROM people WHERE age > 40", "llm")
    assert len(calls.revisions) == 1


def test_a_new_draft_is_placed_by_its_own_context_not_the_last_attempts_feedback():
    # The last attempt failed on PetAge; the record fixes PetAge where its checker named it. A
    # new draft is unchecked: that feedback is another action's, so the record has no place in
    # it (no context of the record's matches) and is not offered. A draft that repeats the
    # failed action is judged with that action's feedback.
    error = "SQL error: OperationalError: no such column: PetAge"
    pets = _with_feedback(helpers.make_record(
        source_task_id="p1", original="SELECT PetType FROM Pets ORDER BY PetAge",
        improved="SELECT PetType FROM Pets ORDER BY pet_age", condition=""), error)
    failed = "SELECT max(PetAge) FROM Pets"
    draft = "SELECT AVG(PetAge), MAX(PetAge) FROM Pets GROUP BY PetType"
    info, _ = _decide([pets], draft, "replay", fits=record_fits, last=(failed, error))
    assert info.record_id is None and info.log["excluded_no_place"] == [pets.record_id]
    info, _ = _decide([pets], draft, "replay", last=(failed, error))   # chosen: no replay
    assert info.record_id == pets.record_id and info.action == draft
    assert info.log["revision"] == "no_place"
    info, _ = _decide([pets], failed + "\n", "replay", fits=record_fits, last=(failed, error))
    assert info.record_id == pets.record_id and info.action == "SELECT max(pet_age) FROM Pets"


DESC = helpers.make_record(source_task_id="d1", condition="",
                           original="SELECT name FROM people ORDER BY age LIMIT 1",
                           improved="SELECT name FROM people ORDER BY age DESC LIMIT 1")


def test_a_replay_that_does_not_parse_is_refused_at_retrieval_revision_and_transfer(tmp_path):
    # Every hunk has its place in the draft, but "age DESC ASC" is no SQL.
    draft = "SELECT name FROM people ORDER BY age ASC, name LIMIT 3"
    assert record_fits(DESC, _query(draft))                      # no domain: cannot tell
    assert not place_test(SQL_NAMES)(DESC, _query(draft))
    info, _ = _decide([DESC], draft, "replay", fits=place_test(SQL_NAMES), names=SQL_NAMES)
    assert info.record_id is None and info.log["excluded_no_place"] == [DESC.record_id]
    info, _ = _decide([DESC], draft, "replay", names=SQL_NAMES)  # chosen: the draft stands
    assert info.action == draft and info.log["revision"] == "no_place"
    tasks, evaluator, _ = helpers.people_benchmark(tmp_path, {
        "d1": ("People aged at least 30.", ">= 30"), "o": ("People older than 40.", "> 40")})
    failed = [FailedAction("o", 0, draft, 0.0, "rows differ")]

    async def check(task, action):
        return evaluator.evaluate(evaluator.reset(task), action)
    tried, _ = asyncio.run(transfer_checks([DESC], tasks, failed, check, 8))
    refused, _ = asyncio.run(transfer_checks([DESC], tasks, failed, check, 8, names=SQL_NAMES))
    assert tried == {DESC.record_id: (1, 0)} and refused == {DESC.record_id: (0, 0)}


# -- the same mistake in another question ------------------------------------------------------

def test_a_fix_next_to_the_questions_literal_is_carried_to_another_literal():
    # The record dropped a LIMIT written after its question's number; another question's draft
    # makes the same mistake after another number.
    assert replay_edit("SELECT name FROM people WHERE age >= 20 LIMIT 1",
                       "SELECT name FROM people WHERE age >= 20",
                       "SELECT count(*) FROM people WHERE age < 33 LIMIT 1") == \
        "SELECT count(*) FROM people WHERE age < 33"
    # a value in the wrong column, next to another question's string
    assert replay_edit("SELECT Name FROM singer WHERE Name = 'France' OR Age > 30",
                       "SELECT Name FROM singer WHERE Country = 'France' OR Age > 30",
                       "SELECT count(*) FROM singer WHERE Age < 20 AND Name = 'Spain' OR "
                       "Name = 'Bob'") is None   # two places for it: none is chosen
    assert replay_edit("SELECT Name FROM singer WHERE Name = 'France' OR Age > 30",
                       "SELECT Name FROM singer WHERE Country = 'France' OR Age > 30",
                       "SELECT Name FROM singer WHERE Name = 'Spain' OR Age > 40") == \
        "SELECT Name FROM singer WHERE Country = 'Spain' OR Age > 40"
    # the removed text itself must match: another mistake is not this one
    assert replay_edit("SELECT name FROM people WHERE age >= 20 LIMIT 1",
                       "SELECT name FROM people WHERE age >= 20",
                       "SELECT name FROM people WHERE age < 33 LIMIT 2") is None


# -- transfer evidence --------------------------------------------------------------------------

QUESTIONS = {"src": ("People aged at least 30.", ">= 30"),
             "twin": ("Which people are at least 30?", ">= 30"),      # the source's reference
             "strict": ("People older than 40.", "> 40"),
             "other": ("People aged at least 50.", ">= 50")}


def _failed(task_id, action, decision=0):
    return {"phase": "construction", "task_id": task_id, "decision": decision, "action": action,
            "outcome": {"success": False, "utility": 0.0, "feedback": "rows differ"}}


def test_transfer_checks_replay_records_on_other_references_failed_actions(tmp_path):
    tasks, evaluator, _ = helpers.people_benchmark(tmp_path, QUESTIONS)
    bound = helpers.make_record(source_task_id="src", original="SELECT name FROM people WHERE "
                                "age > 30", improved="SELECT name FROM people WHERE age >= 30")
    decisions = [_failed("twin", "SELECT name FROM people WHERE age > 30"),
                 _failed("strict", "SELECT name FROM people WHERE age > 40 LIMIT 1"),
                 _failed("other", "SELECT name FROM people WHERE age > 50"),
                 _failed("other", "SELECT name FROM people WHERE age > 50", decision=1),
                 {**_failed("other", "SELECT 1"), "phase": "evaluation"}]
    failed = failed_actions(decisions)
    assert [(f.task_id, f.decision) for f in failed] == [("twin", 0), ("strict", 0), ("other", 0)]
    checked = []

    async def check(task, action):
        checked.append((task.task_id, action))
        return evaluator.evaluate(evaluator.reset(task), action)
    evidence, entries = asyncio.run(transfer_checks([bound], tasks, failed, check, max_tries=8))
    # the twin shares the source's reference: never tried; strict fails, other verifies
    assert [t for t, _ in checked] == ["strict", "other"]
    assert evidence == {bound.record_id: (2, 1)}
    assert [e["verified"] for e in entries] == [False, True]
    evidence, _ = asyncio.run(transfer_checks([bound], tasks, failed, check, max_tries=1))
    assert evidence == {bound.record_id: (1, 0)}


def test_a_try_that_removes_the_reported_mistake_counts_even_where_another_remains(tmp_path):
    # Another question's draft misnames the same column (pet_type) and also reads a column its
    # table lacks (age): the record's fix removes the first error, the checker then reports the
    # second. A replay that brings in a name of its own (CountryId) does not count.
    import sqlite3
    from evaluators.sql import SQLEvaluator
    from evaluators.sql.checker import SQLReference
    db = tmp_path / "pets.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE Pets (PetID INTEGER, PetType TEXT, weight REAL)")
    conn.executemany("INSERT INTO Pets VALUES (?, ?, ?)", [(1, "cat", 3.0), (2, "dog", 9.0)])
    conn.commit()
    conn.close()
    error = "SQL error: OperationalError: no such column: "
    pets = _with_feedback(helpers.make_record(
        source_task_id="src", original="SELECT count(DISTINCT pet_type) FROM Pets",
        improved="SELECT count(DISTINCT PetType) FROM Pets", condition=""), error + "pet_type")
    wrong = _with_feedback(helpers.make_record(
        source_task_id="src", original="SELECT count(DISTINCT PetType) FROM Pets",
        improved="SELECT count(DISTINCT PetKind) FROM Pets", condition=""), "")
    task = lambda tid, gold: Task(tid, "sql", "spider", "q", "", "join / predicate",
                                  reference=SQLReference(gold, str(db), "spider"),
                                  environment="pets")
    tasks = [task("src", "SELECT count(DISTINCT PetType) FROM Pets"),
             task("other", "SELECT PetType, max(weight) FROM Pets GROUP BY PetType")]
    evaluator = SQLEvaluator()
    drafts = [("SELECT pet_type, max(age) FROM Pets GROUP BY pet_type", error + "pet_type"),
              ("SELECT count(DISTINCT PetType) FROM Pets WHERE kind = 1", error + "kind")]
    failed = failed_actions([{**_failed("other", a), "outcome": {"success": False,
                                                                  "utility": 0.0, "feedback": f}}
                             for a, f in drafts])

    async def check(t, action):
        return evaluator.evaluate(evaluator.reset(t), action)
    evidence, entries = asyncio.run(transfer_checks([pets, wrong], tasks, failed, check, 8))
    assert entries[0]["feedback"] == error + "age" and entries[0]["verified"]
    assert evidence[pets.record_id] == (1, 1)
    assert evidence[wrong.record_id] == (1, 0)   # PetKind: its own mistake, not a fix
    assert "PetKind" in entries[1]["feedback"]


def test_a_record_whose_every_transfer_try_failed_is_not_offered():
    refuted = dataclasses.replace(BOUND, transfer_tries=3, transfer_verified=0)
    carried = dataclasses.replace(NO_LIMIT, transfer_tries=3, transfer_verified=1)
    untried = helpers.make_record(source_task_id="b3", condition="")
    result = RetrievalIndex([refuted, carried, untried]).retrieve(
        _query("SELECT name FROM people WHERE age > 40 LIMIT 1"))
    assert {c.record.record_id for c in result.candidates} == {carried.record_id,
                                                                untried.record_id}
    assert result.excluded_transfer == (refuted.record_id,)
    assert refuted.transfer_failed and not carried.transfer_failed and not untried.transfer_failed


def test_transfer_evidence_survives_the_store_file(tmp_path):
    from countermem_jax.method.memory import MemoryRecord
    record = dataclasses.replace(BOUND, transfer_tries=4, transfer_verified=2)
    assert MemoryRecord.from_json(record.to_json()) == record
    old = BOUND.to_json()   # no evidence: the fields are left out, as before they existed
    assert "transfer_tries" not in old and MemoryRecord.from_json(old) == BOUND
    with pytest.raises(ValueError, match="transfer_tries"):
        MemoryRecord.from_json({**record.to_json(), "transfer_verified": 5})


# -- a distilled situation that repeats itself --------------------------------------------------

SENTENCE = "An inclusive bound was written as a strict comparison."


def test_repeating_situations_are_caught():
    assert repeats_itself(f"{SENTENCE} {SENTENCE} {SENTENCE}")
    loop = "the draft must join the people table and the draft must join the people table"
    assert repeats_itself(loop)
    assert not repeats_itself("An inclusive bound was written as strict. The age column.")
    assert without_repeats(f"{SENTENCE} {SENTENCE.lower()} {SENTENCE}") == SENTENCE
    assert without_repeats(loop) == ""


def test_a_repeating_distilled_situation_is_stored_once(tmp_path):
    from test_pipeline import QUESTIONS as PIPELINE, _config, scripted
    fake = scripted()
    for rule in fake.rules:
        if rule.template == "DISTIL_RECORD":
            rule.reply = (f"SITUATION: {SENTENCE} {SENTENCE} {SENTENCE}\n"
                          "CONDITION: bound == inclusive")
    bench = helpers.people_benchmark(tmp_path, {t: (q, g) for t, (q, g, _) in PIPELINE.items()})
    experiment.build_memory(_config(tmp_path), tmp_path / "wd", backbone=fake, benchmark=bench)
    record = load_frozen(tmp_path / "wd" / "store_frozen.jsonl").records[0]
    assert record.situation.count("strict comparison") == 1
    entries = RunLog(tmp_path / "wd" / "log.jsonl").events("counterfactual")
    assert any(e.get("situation_repeated") for e in entries)


# -- what the evaluation reports ----------------------------------------------------------------

def _use(task_id, draft, action, success, label, decision=0):
    return {"task_id": task_id, "decision": decision, "draft": draft, "action": action,
            "changed": draft != action, "outcome": {"success": success, "utility": float(success)},
            "memory": {"covered": True, "record_id": "r", "retrieved": [{"record_id": "r"}],
                       "revision": "replay" if draft != action else "no_place"},
            "reuse": {"record_id": "r", "label": label}}


def test_run_metrics_count_the_uses_that_changed_the_draft_and_those_that_were_right():
    ends = [{"task_id": t, "solved": s, "calls": 1, "failures": 0, "tokens": 1}
            for t, s in (("a", True), ("b", False), ("c", False), ("d", True))]
    decisions = [_use("a", "x1", "y1", True, 1),      # changed, the draft had failed: right
                 _use("b", "x2", "y2", False, 0),     # changed, still wrong
                 _use("c", "x3", "x3", False, 0),     # no place: unchanged
                 _use("d", "x4", "y4", True, 1)]      # changed and solved, but so did the draft
    base = [{"task_id": t, "decision": 0, "action": a, "outcome": {"success": s, "utility": float(s)}}
            for t, a, s in (("a", "x1", False), ("b", "x2", False), ("c", "x3", False),
                            ("d", "x4", True))]
    m = metrics.run_metrics(ends, decisions, base)
    assert (m["selected_uses"], m["uses_changed_draft"], m["uses_changed_right"],
            m["uses_no_place"]) == (4, 3, 1, 1)
    # without the paired memory-free run the reuse label judges
    assert metrics.run_metrics(ends, decisions)["uses_changed_right"] == 2


def _with_feedback(record, feedback):
    return dataclasses.replace(record, evidence=dataclasses.replace(
        record.evidence, original=dataclasses.replace(record.evidence.original,
                                                      feedback=feedback)))


def test_a_name_the_checker_reports_is_fixed_only_where_it_reports_the_same_mistake():
    # The record replaced car_names.Model (its checker: no such column: car_names.Model); a
    # draft whose checker reports car_names.Year reads car_names for another column.
    error = "SQL error: OperationalError: no such column: "
    record = _with_feedback(helpers.make_record(
        original="SELECT COUNT(car_names.Model) FROM car_makers JOIN model_list ON a = b",
        improved="SELECT COUNT(model_list.Model) FROM car_makers JOIN model_list ON a = b",
        condition=""), error + "car_names.Model")
    draft = ("SELECT FullName FROM car_makers JOIN car_names ON car_makers.Id = car_names.Maker "
             "WHERE car_names.Year = 1970")
    # car_names qualified Model in the record: a draft's car_names before Year is no place
    assert replay_edit(record.original_action, record.improved_action, draft,
                       error + "car_names.Year") is None
    assert replay(record, draft, error + "car_names.Year") is None
    # the same mistake, its qualifier aside, is fixed at every place the draft makes it
    pets = _with_feedback(helpers.make_record(
        original="SELECT PetType FROM Pets ORDER BY PetAge",
        improved="SELECT PetType FROM Pets ORDER BY pet_age", condition=""), error + "PetAge")
    draft = "SELECT AVG(PetAge), MAX(PetAge) FROM Pets GROUP BY PetType"
    assert replay(pets, draft, error + "T1.PetAge") == \
        "SELECT AVG(pet_age), MAX(pet_age) FROM Pets GROUP BY PetType"
    assert replay(pets, draft, error + "PetType") is None
    # feedback that names PetAge but reports no name: placed without the record's feedback only
    named_only = "SQL error: OperationalError: no such column: PetAge in GROUP BY"
    assert replay_edit(pets.original_action, pets.improved_action, draft, named_only) == \
        "SELECT AVG(pet_age), MAX(pet_age) FROM Pets GROUP BY PetType"
    assert replay(pets, draft, named_only) is None
