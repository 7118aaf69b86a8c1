"""Embedding, eligibility and ranking (paper Appendix B.4)."""
import asyncio
import subprocess
import sys

import numpy as np
import pytest

from countermem_jax.method import text_embedding as embedding
from countermem_jax.method.conditions import TaskFacts, never_holds
from countermem_jax.method.conditions.checkers import (CompositeChecker, LLMJudgeChecker, RuleChecker,
                                                 parse_yes_no)
from countermem_jax.method.retrieval.retrieve import (ELIGIBLE, PADDING, SAME_TASK, RetrievalIndex,
                                                      topk_eligible)
from helpers import agent_config, make_record, paper

TEXTS = ["List singers aged at least 30", "SELECT name FROM singer WHERE age >= 30", "héllo wörld ✓"]


def test_embedding_is_deterministic_across_processes():
    code = ("import sys, numpy as np; from countermem_jax.method import text_embedding as embedding; "
            f"sys.stdout.buffer.write(embedding.embed_texts({TEXTS!r}).tobytes())")
    outputs = [subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                              env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}).stdout
               for seed in (1, 2)]
    assert outputs[0] == outputs[1]
    assert outputs[0] == embedding.embed_texts(TEXTS).tobytes()


def test_embedding_shape_norm_and_known_values():
    e = embedding.embed_texts(TEXTS + [""])
    assert e.shape == (4, 512) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e[:3], axis=1), 1.0, rtol=1e-5)
    assert not e[3].any()
    # Pin the hash: "abc" is one 3-gram; FNV-1a("abc") = 0x1a47e90b.
    h = 0x1A47E90B
    k = (h ^ (h >> 9)) % 1024
    expected = np.zeros(512, np.float32)
    expected[k >> 1] = -1.0 if k & 1 else 1.0
    np.testing.assert_array_equal(embedding.embed_text("ABC"), expected)


def test_batched_embedding_equals_one_by_one():
    texts = [f"query {i} " * (i % 40 + 1) for i in range(300)]
    batch = embedding.embed_texts(texts)
    single = np.stack([embedding.embed_text(t) for t in texts])
    np.testing.assert_array_equal(batch, single)


def test_embedding_cache_gives_the_computed_rows_and_stays_bounded(monkeypatch):
    """Recently embedded texts are answered from the cache, row for row what computing gives
    (duplicates in one batch included); the cache holds at most ``CACHED_TEXTS`` texts, and a
    caller writing into the returned array does not change what the next call returns."""
    monkeypatch.setattr(embedding, "_CACHE", {})
    monkeypatch.setattr(embedding, "CACHED_TEXTS", 4)
    computed = []
    compute = embedding.compute_embeddings
    monkeypatch.setattr(embedding, "compute_embeddings",
                        lambda texts: computed.append(list(texts)) or compute(texts))
    texts = TEXTS + [TEXTS[0]]
    first = embedding.embed_texts(texts)
    np.testing.assert_array_equal(first, compute(texts))
    assert computed == [TEXTS]  # the duplicate computed once
    first[:] = 0.0
    again = embedding.embed_texts(TEXTS[::-1])
    np.testing.assert_array_equal(again, compute(TEXTS[::-1]))
    assert computed == [TEXTS]  # all from the cache
    embedding.embed_texts(["one more", "and another"])
    assert len(embedding._CACHE) == 4 and TEXTS[0] not in embedding._CACHE  # oldest out


def test_a_repeated_retrieval_gives_the_same_result_and_a_changed_verdict_another():
    """An index scores every retrieval afresh: the same retrieval asked again (a construction
    run replayed, or run again) gives the same result, and a different condition verdict a
    different one."""
    records = [make_record(source_task_id=f"t{i}", situation=f"case {i} about singers",
                           condition="the request is about singers" if i else "")
               for i in range(3)]

    class Verdicts:  # what the condition checker says, set by the test
        holds = True

        def compatible(self, condition, task):
            return self.holds

    checker = Verdicts()
    index = RetrievalIndex(records, checker=checker)
    task = TaskFacts("q", "list the singers")
    first = index.retrieve(task)
    assert index.retrieve(task) == first
    assert len(first.candidates) == 3
    checker.holds = False
    assert len(index.retrieve(task).candidates) == 1


def test_projection_is_fixed():
    p = embedding.projection_matrix()
    assert p.shape == (512, 32)
    rng = np.random.Generator(np.random.PCG64(20260824))
    np.testing.assert_array_equal(p, (rng.standard_normal((512, 32)) / np.sqrt(32)).astype(np.float32))


def _task(task_id, text, **features):
    return TaskFacts(task_id=task_id, text=text, features=features)


def test_same_task_records_are_excluded():
    own = make_record(source_task_id="q7", situation="singers aged at least 30")
    other = make_record(source_task_id="q1", situation="a completely different matter",
                        original="SELECT 1", improved="SELECT 2")
    index = RetrievalIndex([own, other])
    result = index.retrieve(_task("q7", "singers aged at least 30", bound="inclusive"))
    assert [c.record.record_id for c in result.candidates] == [other.record_id]
    assert result.excluded_same_task == (own.record_id,)


def test_look_alike_task_with_false_condition_is_filtered():
    record = make_record(source_task_id="src", situation="count singers aged at least 30",
                         condition="bound == inclusive")
    index = RetrievalIndex([record])
    inclusive = index.retrieve(_task("a", "count singers aged at least 40", bound="inclusive"))
    look_alike = index.retrieve(_task("b", "count singers aged strictly above 40", bound="strict"))
    assert inclusive.covered and inclusive.candidates[0].record is record
    assert not look_alike.covered
    assert look_alike.excluded_condition == (record.record_id,)


def test_condition_filter_can_be_switched_off_for_the_ablation():
    record = make_record(source_task_id="src", condition="bound == inclusive")
    index = RetrievalIndex([record], use_conditions=False)
    assert index.retrieve(_task("b", "strictly above 40", bound="strict")).covered


def test_reuse_term_breaks_a_relevance_tie():
    a = make_record(source_task_id="s1", situation="same situation text", original="SELECT a",
                    improved="SELECT b", reuse=0.0, condition="")
    b = make_record(source_task_id="s2", situation="same situation text", original="SELECT c",
                    improved="SELECT d", reuse=0.5, condition="")
    result = RetrievalIndex([a, b]).retrieve(_task("x", "same situation text"))
    assert [c.record.record_id for c in result.candidates] == [b.record_id, a.record_id]
    assert result.candidates[0].score == pytest.approx(result.candidates[1].score + 0.1, abs=1e-5)
    assert result.candidates[0].relevance == pytest.approx(1.0, abs=1e-5)


def test_top_k_order_and_limit():
    records = [make_record(source_task_id=f"s{i}", situation="boundary " * (i + 1) + "x" * (5 * i),
                           original=f"SELECT {i}", improved=f"SELECT {i + 1}", condition="")
               for i in range(6)]
    result = RetrievalIndex(records).retrieve(_task("q", "boundary"))
    scores = [c.score for c in result.candidates]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    assert result.candidates[0].record.source_task_id == "s0"


def test_batched_retrieval_matches_single_queries():
    records = [make_record(source_task_id=f"s{i}", situation=f"topic {i} about table {i % 3}",
                           original=f"SELECT {i}", improved=f"SELECT {i + 1}", condition="")
               for i in range(20)]
    index = RetrievalIndex(records)
    tasks = [_task(f"s{i}", f"topic {i} table {i % 3}") for i in range(10)]
    batch = index.retrieve_batch(tasks)
    for task, res in zip(tasks, batch):
        single = index.retrieve(task)
        assert [c.record.record_id for c in res.candidates] == \
            [c.record.record_id for c in single.candidates]


def test_jitted_core_never_returns_ineligible_rows():
    q = np.eye(4, dtype=np.float32)[:2]
    keys_t = np.eye(4, dtype=np.float32)
    reasons = np.array([[SAME_TASK, ELIGIBLE, SAME_TASK, PADDING],
                        [ELIGIBLE, SAME_TASK, ELIGIBLE, PADDING]], np.int8)
    scores, idx, _ = topk_eligible(q, keys_t, np.zeros(4, np.float32), reasons, 0.2, k=3)
    assert set(np.asarray(idx[0])[np.isfinite(np.asarray(scores[0]))]) == {1}
    assert set(np.asarray(idx[1])[np.isfinite(np.asarray(scores[1]))]) == {0, 2}


def test_each_record_carries_the_first_exclusion_reason_that_holds():
    """One reason per (decision, record), in the order same task, stale, condition, transfer,
    no place; the mask and each of the log's lists are read from it."""
    import dataclasses
    from countermem_jax.method.retrieval import retrieve
    def rec(i, condition="", **fields):
        return dataclasses.replace(make_record(source_task_id=f"s{i}", situation=f"case {i}",
                                               condition=condition), **fields)
    false, failed = "bound == strict", dict(transfer_tries=1)
    records = [rec(0, false, source_task_id="q"), rec(1, false), rec(2, false, **failed),
               rec(3, **failed), rec(4), rec(5)]
    stale = {records[0].record_id, records[1].record_id}
    index = RetrievalIndex(records, world=lambda r: "changed" if r.record_id in stale else "",
                           fits=lambda r, task: r is not records[3] and r is not records[4])
    task = _task("q", "case", bound="inclusive")
    assert index.reasons([task]).tolist() == [[retrieve.SAME_TASK, retrieve.STALE,
                                               retrieve.CONDITION, retrieve.TRANSFER,
                                               retrieve.NO_PLACE, retrieve.ELIGIBLE]]
    result = index.retrieve(task)
    ids = [r.record_id for r in records]
    assert [c.record for c in result.candidates] == [records[5]] and result.eligible_count == 1
    assert (result.excluded_same_task, result.excluded_stale, result.excluded_condition,
            result.excluded_transfer, result.excluded_no_place) == (
        (ids[0],), (ids[1],), (ids[2],), (ids[3],), (ids[4],))


def test_rule_checker_grammar():
    task = _task("t", 'How many singers are "older than" 30?', bound="strict", db_id="concert",
                 has_order=False)
    check = RuleChecker().check
    assert check("bound == strict", task) is True
    assert check("bound != strict", task) is False
    assert check("db_id in [concert, pets] AND bound == strict", task) is True
    assert check("has has_order", task) is False and check("not has_order", task) is True
    assert check('question contains "older than"', task) is True
    assert check("the question asks for an inclusive bound", task) is None


def test_llm_judge_for_free_text_conditions_with_fake_backbone():
    asked = []

    async def fake(prompt):
        asked.append(prompt)
        return "Sure! The answer is: NO." if "strictly" in prompt else "```\nYES\n```"

    checker = CompositeChecker([RuleChecker(), LLMJudgeChecker(paper("judge"))])
    cond = "the request includes the boundary value"
    a, b = _task("a", "at least 30"), _task("b", "strictly above 30")
    counts = asyncio.run(checker.judge_pending([cond, cond, "bound == strict"], a, fake))
    assert (counts.compatible, counts.incompatible, counts.undecided, counts.judged_by_llm) == \
        (1, 1, 0, 1)  # the rule condition is decided by the rule checker, no call
    asyncio.run(checker.judge_pending([cond], b, fake))
    asyncio.run(checker.judge_pending([cond], b, fake))
    assert checker.compatible(cond, a) is True
    assert checker.compatible(cond, b) is False
    assert len(asked) == 2  # cached per (condition, task, run scope)
    with pytest.raises(RuntimeError, match="not judged"):
        checker.compatible(cond, _task("c", "never judged"))
    assert parse_yes_no("maybe") is None


def test_unknown_policy():
    task = _task("a", "text")
    assert CompositeChecker([RuleChecker()], unknown="include").compatible("free text", task)
    assert not CompositeChecker([RuleChecker()], unknown="exclude").compatible("free text", task)
    with pytest.raises(ValueError, match="unknown-condition policy"):
        CompositeChecker(unknown="sometimes")


# ----------------------------------------------------------------- conditions from verified edits
from countermem_jax.domains import sql_names  # noqa: E402
from countermem_jax.domains.base import TEXT_NAMES  # noqa: E402
from countermem_jax.method.conditions import derive, draft_uses, mentions  # noqa: E402


def derived_condition(domain, *edit):
    """The derived condition's text, as the domain named ``domain`` reads its names."""
    return str(derive(sql_names.SQL_NAMES if domain == "sql" else TEXT_NAMES, *edit))


SWAP_BEFORE = ("SELECT T1.name FROM poker_player AS T1 JOIN people AS T2 "
               "ON T1.people_id = T2.people_id")
SWAP_AFTER = ("SELECT T2.name FROM poker_player AS T1 JOIN people AS T2 "
              "ON T1.people_id = T2.people_id")


def test_sql_edit_condition_names_what_the_edit_touched():
    assert derived_condition("sql", SWAP_BEFORE, SWAP_AFTER, "poker_player") == \
        "environment == poker_player AND edit touches [name] AND edit touches any [people, poker_player]"
    drop = derived_condition(
        "sql", "SELECT count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id "
        "WHERE T1.country = 'France'", "SELECT count(*) FROM singer WHERE country = 'France'", "cs")
    # a dropped join touches its tables; its keys follow from the schema and are not required
    assert drop == "environment == cs AND edit touches any [concert, singer] AND draft has " \
        "[concert, singer_id]"   # the draft still joins concert: the mistake is there
    # a join completed for a column of another table: the column, and either table
    assert derived_condition(
        "sql", "SELECT Name FROM poker_player ORDER BY Earnings",
        "SELECT people.Name FROM poker_player JOIN people ON poker_player.people_id = "
        "people.people_id ORDER BY Earnings", "poker_player") == \
        "environment == poker_player AND edit touches [name] AND edit touches any " \
        "[people, poker_player] AND draft lacks [people, people_id]"
    # a column moved to a joined table: the column is what the fix is about
    assert derived_condition(
        "sql", "SELECT Birth_Date FROM poker_player ORDER BY Earnings",
        "SELECT people.Birth_Date FROM poker_player JOIN people ON poker_player.people_id = "
        "people.people_id ORDER BY Earnings", "poker_player") == \
        "environment == poker_player AND edit touches [birth_date] AND edit touches any " \
        "[people, poker_player] AND draft lacks [people, people_id]"
    # a column renamed: the name the fix introduces, not the mistaken one
    assert derived_condition(
        "sql", "SELECT director FROM cartoon", "SELECT directed_by FROM cartoon", "tv") == \
        "environment == tv AND edit touches [directed_by] AND draft has [director] AND " \
        "draft lacks [directed_by]"
    assert derived_condition("sql", "SELECT 1", "SELECT 2", "") == \
        "edit touches any []"  # nothing nameable: never holds
    assert derived_condition("python", "if x < n:", "if x <= n:", "") == \
        "edit touches any []"
    assert mentions("song_release_year", "Which songs were released in which year?")
    assert mentions("singer", "How many singers are there?")
    assert not mentions("people", "List the earnings of poker players")


def test_a_derived_condition_holds_only_for_a_draft_that_repeats_the_mistake_and_lacks_the_fix():
    """The case that broke a correct draft: a record fixing ``PetAge`` -> ``pet_age`` was offered
    to a draft that already read ``pet_age``, and the model copied the record's query over it."""
    condition = derived_condition(
        "sql", "SELECT PetType, weight FROM Pets ORDER BY PetAge ASC LIMIT 1",
        "SELECT PetType, weight FROM Pets ORDER BY Pets.pet_age ASC LIMIT 1", "pets_1")
    assert condition.endswith("AND draft has [petage] AND draft lacks [pet_age]")
    record = make_record(source_task_id="src", condition=condition, situation="pet age column")
    index = RetrievalIndex([record], checker=CompositeChecker([RuleChecker("derive")]))
    question = "Find the id and weight of all pets whose age is older than 1"

    def offered(draft):
        task = TaskFacts("q", question, {"environment": "pets_1"}, draft=draft)
        return bool(index.retrieve(task).candidates)
    assert offered("SELECT PetID, weight FROM Pets WHERE PetAge > 1")          # the mistake
    assert not offered("SELECT PetID, weight FROM Pets WHERE pet_age > 1")     # already fixed
    assert not offered("SELECT PetID, weight FROM Pets WHERE age > 1")         # another mistake
    assert offered(None)   # outside a decision the draft clauses do not restrict
    # string literals count as text; identifiers as whole words only
    assert draft_uses(["petage"], "SELECT petage FROM pets")
    assert not draft_uses(["age"], "SELECT petage FROM pets")
    assert draft_uses(["ben jones"], "WHERE d = 'Ben Jones'")
    assert draft_uses(["people", "cars"], "SELECT x FROM people", any_=True)
    assert not draft_uses(["people", "cars"], "SELECT x FROM people")
    assert never_holds("draft lacks []") and not never_holds("draft has []")


def test_an_error_repair_is_offered_after_the_same_kind_of_error_whatever_column_it_names():
    """A join completed for ``Birth_Date`` (no such column in poker_player) is the lesson a
    failed ``SELECT Name FROM poker_player`` needs: after that error, to a draft that reads one
    of the tables the repair touched (whatever the question calls them), not before any
    attempt, and not to a draft that already joins people."""
    condition = derived_condition(
        "sql", "SELECT Birth_Date FROM poker_player ORDER BY Earnings",
        "SELECT people.Birth_Date FROM poker_player JOIN people ON poker_player.people_id = "
        "people.people_id ORDER BY Earnings", "poker_player",
        "SQL error: OperationalError: no such column: Birth_Date")
    assert condition == ('environment == poker_player AND feedback contains "no such column" '
                         'AND draft has any [people, poker_player] AND draft lacks [people, '
                         'people_id]')
    assert sql_names.error_kind("SQL error: OperationalError: ambiguous column name: a") \
        == "ambiguous column name"
    assert sql_names.error_kind("Wrong result. Your query returned 0 rows") == ""
    checker, question = RuleChecker(), "What are the names of poker players?"

    def holds(draft, feedback):
        return checker.check(condition, TaskFacts("q", question, {"environment": "poker_player"},
                                                  draft=draft, feedback=feedback))
    draft = "SELECT Name FROM poker_player"
    assert holds(draft, "SQL error: OperationalError: no such column: Name")
    assert not holds(draft, "")                                    # before any attempt
    assert not holds(draft, "Wrong result. Your query returned 0 rows")
    assert not holds("SELECT people.Name FROM poker_player JOIN people ON poker_player.people_id"
                     " = people.people_id", "SQL error: OperationalError: no such column: x")
    assert holds(draft, None)   # outside a decision
    # the question need not name the table; the draft must read it
    question = "Who earned the most?"
    assert holds(draft, "SQL error: OperationalError: no such column: Name")
    assert not holds("SELECT Name FROM players", "SQL error: OperationalError: no such column: x")
    assert not never_holds(condition) and never_holds("draft has any []")
    assert RuleChecker("exclude").check(condition, TaskFacts(
        "q", question, {"environment": "poker_player"}, draft=draft, feedback="no such column"))\
        is False    # a derived condition under memory.fallback_condition=exclude


def test_a_column_repair_inside_one_table_gets_a_condition_that_can_hold():
    """``pet_type`` → ``PetType`` touches no table: the condition names the wrong column in the
    draft and the right one's absence, never an empty table list (which could never hold)."""
    condition = derived_condition(
        "sql", "SELECT count(DISTINCT pet_type) FROM Pets", "SELECT COUNT(DISTINCT PetType) FROM "
        "Pets", "pets_1", "SQL error: OperationalError: no such column: pet_type")
    assert condition == ('environment == pets_1 AND feedback contains "no such column" AND '
                         'draft has [pet_type] AND draft lacks [pettype]')
    assert not never_holds(condition)


def test_a_decision_checks_the_draft_clauses_against_its_own_draft():
    from countermem_jax.method.agents import Agent, MemoryCalls
    from countermem_jax.method.agents import TaskContext as RunContext
    from countermem_jax.method.memory_use import CounterMemAugmentation
    from countermem_jax.method.selector import policies
    from evaluators.base import Outcome, State, Task
    record = make_record(source_task_id="src", situation="pet age column",
                         condition="environment == pets_1 AND draft has [petage] AND draft "
                                   "lacks [pet_age]")
    index = RetrievalIndex([record], checker=CompositeChecker([RuleChecker("derive")]))
    aug = CounterMemAugmentation(MemoryCalls(Agent(None, None, None, agent_config())),
                                 index_source=lambda: index,
                                 selector=policies.make_fixed("always_skip"))
    task = Task("q", "sql", "spider", "Weight of pets older than 1", "", "predicate",
                environment="pets_1")

    def decide(draft, error=None):
        state = State(task)
        if error is not None:   # the last attempt failed with this feedback
            state = state.after(draft, Outcome(0.0, False, True, error))
        ctx = RunContext(task, "evaluation", "countermem", state, call_budget=3,
                         token_budget=10_000, max_decisions=3)
        return asyncio.run(aug.decide(ctx, draft)).log
    assert decide("SELECT weight FROM Pets WHERE PetAge > 1")["retrieved"]
    assert decide("SELECT weight FROM Pets WHERE pet_age > 1")["excluded_condition"] == \
        [record.record_id]
    # the decision's feedback is the last attempt's
    index = RetrievalIndex([make_record(
        source_task_id="src", situation="pet age column",
        condition='environment == pets_1 AND feedback contains "no such column"')],
        checker=CompositeChecker([RuleChecker("derive")]))
    assert not decide("SELECT weight FROM Pets WHERE PetAge > 1")["retrieved"]
    assert decide("SELECT weight FROM Pets WHERE PetAge > 1",
                  "SQL error: OperationalError: no such column: PetAge")["retrieved"]


def test_a_record_without_its_own_condition_is_not_offered_on_every_question_of_its_database():
    condition = derived_condition("sql", SWAP_BEFORE, SWAP_AFTER, "poker_player")
    record = make_record(source_task_id="src", condition=condition,
                         situation="poker players' names are stored in people")
    features = {"environment": "poker_player"}
    names = _task("q1", "What are the names of poker players?", **features)
    earnings = _task("q2", "What is the average earnings of poker players?", **features)
    elsewhere = TaskFacts("q3", "What are the names of singers?", {"environment": "singer"})
    derive = RetrievalIndex([record], checker=CompositeChecker([RuleChecker("derive")]))
    results = derive.retrieve_batch([names, earnings, elsewhere])
    assert [bool(r.candidates) for r in results] == [True, False, False]
    exclude = RetrievalIndex([record], checker=CompositeChecker([RuleChecker("exclude")]))
    assert not any(r.candidates for r in exclude.retrieve_batch([names, earnings, elsewhere]))
    # rule conditions of records that have their own are unaffected by the fallback policy
    own = make_record(source_task_id="src2", condition="environment == poker_player")
    assert RetrievalIndex([own], checker=CompositeChecker([RuleChecker("exclude")])) \
        .retrieve(earnings).candidates
    with pytest.raises(ValueError, match="fallback-condition policy"):
        RuleChecker("sometimes")
