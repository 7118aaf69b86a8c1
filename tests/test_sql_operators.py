"""Module I's SQL edit operators on a small real SQLite database (paper §3.2, Appendix B.4):
each family finds the fix of the mistake it targets, the ranking never reads the reference
query and is deterministic."""
import asyncio
import sqlite3
import types

import pytest

from countermem_jax.method.agents import TaskContext
from countermem_jax.method.counterfactual import CounterfactualBuilder
from countermem_jax.domains import sql as sql_domain
from countermem_jax.method.prompting.prompts import Parsed
from evaluators.base import State, Task
from evaluators.sql import SQLEvaluator
from evaluators.sql.checker import SQLReference
from evaluators.sql.probe import Database
from helpers import paper


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("ops") / "music.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE country (id INTEGER PRIMARY KEY, name TEXT, continent TEXT);
        CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, nickname TEXT,
                             country_id INTEGER REFERENCES country(id));
        CREATE TABLE concert (id INTEGER PRIMARY KEY, title TEXT, venue TEXT,
                              singer_id INTEGER REFERENCES singer(id));
        INSERT INTO country VALUES (1, 'France', 'Europe'), (2, 'Japan ', 'Asia'),
                                   (3, 'Brazil', 'America');
        INSERT INTO singer VALUES (1, 'Ana', 25, 'A', 1), (2, 'Bob', 41, 'B', 2),
                                  (3, 'Cy', 33, 'C', 1), (4, 'Dee', 19, 'D', 3);
        INSERT INTO concert VALUES (1, 'Spring', 'Olympia', 1), (2, 'Summer', 'Olympia', 1),
                                   (3, 'Autumn', 'Budokan', 2), (4, 'Winter', 'Arena', 3);
    """)
    conn.commit()
    conn.close()
    return str(path)


def _passes(db, gold, sql):
    task = Task("t", "sql", "spider", "q", "", "join / predicate",
                reference=SQLReference(gold, db, "spider"))
    ev = SQLEvaluator(timeout_s=2.0)
    return ev.evaluate(ev.reset(task), sql).success


def _error(db, sql):
    ev = SQLEvaluator(timeout_s=2.0)
    task = Task("t", "sql", "spider", "q", "", "", reference=SQLReference("SELECT 1", db, "spider"))
    return ev.evaluate(ev.reset(task), sql).details.get("error", "")


CASES = [  # family, question, draft, gold
    ("error_repair", "What are the names of singers older than 30?",
     "SELECT nam FROM singer WHERE age > 30", "SELECT name FROM singer WHERE age > 30"),
    ("error_repair", "Names of the singers from France?",
     "SELECT name FROM singer JOIN country ON singer.country_id = country.id "
     "WHERE country.name = 'France'",
     "SELECT singer.name FROM singer JOIN country ON singer.country_id = country.id "
     "WHERE country.name = 'France'"),
    ("schema_linking", "What is the age of the singer called Bob?",
     "SELECT nickname FROM singer WHERE name = 'Bob'", "SELECT age FROM singer WHERE name = 'Bob'"),
    ("value_linking", "Which singers come from japan?",
     "SELECT singer.name FROM singer JOIN country ON singer.country_id = country.id "
     "WHERE country.name = 'japan'",
     "SELECT singer.name FROM singer JOIN country ON singer.country_id = country.id "
     "WHERE country.name = 'Japan '"),
    ("value_linking", "Titles of the concerts held at Olympia?",
     "SELECT title FROM concert WHERE title = 'olympia'",
     "SELECT title FROM concert WHERE venue = 'Olympia'"),
    ("error_repair", "Names of the singers who sang at the Budokan venue?",
     "SELECT name FROM singer WHERE venue = 'Budokan'",
     "SELECT singer.name FROM singer JOIN concert ON concert.singer_id = singer.id "
     "WHERE concert.venue = 'Budokan'"),
    ("join", "Names of the singers who performed at the Olympia venue?",
     "SELECT singer.name FROM singer JOIN concert ON concert.id = singer.id "
     "WHERE concert.venue = 'Olympia'",
     "SELECT singer.name FROM singer JOIN concert ON concert.singer_id = singer.id "
     "WHERE concert.venue = 'Olympia'"),
    ("join", "List the names of all singers.",
     "SELECT singer.name FROM singer JOIN concert ON concert.singer_id = singer.id",
     "SELECT name FROM singer"),
    ("rules", "What is the name of the youngest singer?",
     "SELECT name FROM singer ORDER BY age DESC LIMIT 1",
     "SELECT name FROM singer ORDER BY age ASC LIMIT 1"),
]


@pytest.mark.parametrize("family,question,draft,gold", CASES)
def test_each_family_finds_the_fix_in_the_top_four(db, family, question, draft, gold):
    assert not _passes(db, gold, draft)
    error = _error(db, draft)
    made = sql_domain.generate(draft, Database(db), question, error)
    assert any(_passes(db, gold, c.sql) for c in made if c.family == family)
    top = sql_domain.operator_candidates(draft, db=Database(db), question=question, error=error,
                                         k=4)
    assert any(_passes(db, gold, c.sql) for c in top), [(c.family, c.sql) for c in top]


class _NoGold:
    """A reference whose query cannot be read: only the database path is there."""
    comparison = "spider"

    def __init__(self, db_path):
        self.db_path = db_path

    @property
    def gold_sql(self):
        raise AssertionError("an operator read the reference query")


def test_operators_never_read_the_gold(db):
    family, question, draft, gold = CASES[5]
    task = Task("t", "sql", "spider", question, "", "", reference=_NoGold(db))
    sql_domain._ranked_edits_of.cache_clear()
    ev = SQLEvaluator(timeout_s=2.0)
    checked = Task("t", "sql", "spider", question, "", "",
                   reference=SQLReference(gold, db, "spider"))
    outcome = ev.evaluate(ev.reset(checked), draft)
    edits = sql_domain.ranked_edits(task, draft, outcome, (), 4)
    assert any(_passes(db, gold, e) for e, _ in edits)
    assert {source for _, source in edits} <= set(sql_domain.FAMILIES)


def test_ranking_is_deterministic_and_drops_repeated_results(db):
    question, draft = "What is the age and the nickname of each singer?", "SELECT name FROM singer"
    first = sql_domain.operator_candidates(draft, db=Database(db), question=question)
    again = sql_domain.operator_candidates(draft, db=Database(db), question=question)
    assert first == again and len(first) >= 2
    results = [tuple(sorted(sqlite3.connect(db).execute(c.sql).fetchall())) for c in first]
    draft_rows = tuple(sorted(sqlite3.connect(db).execute(draft).fetchall()))
    assert len(set(results)) == len(results) and draft_rows not in results


def test_model_edits_keep_their_slots_once_screened_on_the_database(db):
    """The model's edits go first; one that cannot run or answers as the draft did is dropped
    before any check, and an operator edit with a kept edit's result takes no slot."""
    family, question, draft, gold = CASES[2]
    proposed = ("SELECT agee FROM singer WHERE name = 'Bob'",          # cannot run
                "SELECT nickname FROM singer WHERE name = 'Bob' LIMIT 5",  # the draft's result
                "SELECT age FROM singer WHERE name = 'Bob'")            # kept
    top = sql_domain.operator_candidates(draft, db=Database(db), question=question,
                                         proposed=proposed)
    assert top[0] == sql_domain.Candidate(proposed[2], "llm")
    assert [c for c in top if c.family == "llm"] == top[:1]
    assert all(sqlite3.connect(db).execute(c.sql).fetchall() != [(41,)] for c in top[1:])


def test_error_repair_guesses_no_unrelated_column_and_schema_linking_needs_the_question(db):
    draft = "SELECT birthday FROM singer"
    error = _error(db, draft)
    made = sql_domain.generate(draft, Database(db), "When was each singer born?", error)
    assert not [c for c in made if c.family == "error_repair"]
    # a column swap the question never names is generated but not offered
    draft = "SELECT nickname FROM singer WHERE name = 'Bob'"
    top = sql_domain.operator_candidates(draft, db=Database(db), question="Tell me about Bob.")
    assert not [c for c in top if c.family == "schema_linking"]


def test_an_empty_reference_result_verifies_nothing_in_module_two(db):
    """The real SQL checker marks the empty reference; Module II admits nothing on it."""
    question = "Which singers are older than 100?"
    task = Task("t", "sql", "spider", question, "", "join / predicate",
                reference=SQLReference("SELECT name FROM singer WHERE age > 100", db, "spider"))
    ev = SQLEvaluator(timeout_s=2.0)
    draft = "SELECT name FROM singer"
    outcome = ev.evaluate(ev.reset(task), draft)
    assert not outcome.success and outcome.details["reference_empty"]
    assert "empty" not in outcome.feedback.lower()  # the agent is not told

    async def llm(ctx, template, fields, parse_args=None):
        return Parsed(True, ["SELECT name FROM singer WHERE age > 500"], "", 1)

    async def check(state, action):
        return ev.evaluate(state, action)

    class Store:
        snapshot_id = "s"

        def propose(self, record):
            raise AssertionError("a record was proposed on an empty reference result")

    agent = types.SimpleNamespace(llm=llm, check=check, domain=sql_domain.SQL, evaluator=ev,
                                  backbone=types.SimpleNamespace(model_name="m"))
    builder = CounterfactualBuilder(agent, Store(), paper("construction"))
    ctx = TaskContext(task, "construction", "r", ev.reset(task), 100, 10_000, 3)
    entries = asyncio.run(builder.expand(ctx, ev.reset(task), draft, outcome))
    empty_matches = [e for e in entries if e["utility"] == 1.0]
    assert empty_matches and all(e["reference_empty"] for e in entries)
    assert ctx.cf_reference_empty and not any("admitted" in e for e in entries)


def test_tasks_meeting_an_empty_reference_are_counted_in_the_metrics():
    from countermem_jax.protocol import metrics
    ends = [{"cf_reference_empty": True}, {"cf_reference_empty": False}, {}]
    assert metrics.cost(ends)["reference_empty_tasks"] == 1


@pytest.mark.parametrize("reference, corrected", [
    ("SELECT name FROM singer WHERE age > 100", False),    # empty reference result: refused
    ("SELECT name FROM singer WHERE age > 30", True)])     # a real pass: the next action
def test_test_time_checks_refuse_a_pass_against_an_empty_reference(db, reference, corrected):
    """"WM without CF" at evaluation (``WithinTaskChecks``) takes a checked alternative as the
    task's next action only where it passed against a non-empty reference result, as
    construction admits only such passes."""
    import dataclasses
    from countermem_jax.method.agents import Augmentation
    from countermem_jax.method.counterfactual import WithinTaskChecks
    task = Task("t", "sql", "spider", "Which singers are older than 30?", "", "predicate",
                reference=SQLReference(reference, db, "spider"))
    ev = SQLEvaluator(timeout_s=2.0)
    draft = "SELECT name FROM singer"
    outcome = ev.evaluate(ev.reset(task), draft)
    alternative = reference.replace("100", "500")

    async def llm(ctx, template, fields, parse_args=None):
        return Parsed(True, [alternative], "", 1)

    async def check(state, action):
        return ev.evaluate(state, action)

    agent = types.SimpleNamespace(llm=llm, check=check, domain=sql_domain.SQL, evaluator=ev,
                                  backbone=types.SimpleNamespace(model_name="m"))
    builder = CounterfactualBuilder(agent, None, dataclasses.replace(
        paper("construction"), corrections="within_task"))
    checks = WithinTaskChecks(Augmentation(), builder)
    ctx = TaskContext(task, "evaluation", "r", ev.reset(task), 100, 10_000, 3)
    asyncio.run(checks.after_failure(ctx, ev.reset(task), draft, outcome))
    info = asyncio.run(checks.decide(ctx, draft))
    assert (info.action == alternative) is corrected
    assert bool(info.log.get("within_task_correction")) is corrected
