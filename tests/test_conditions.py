"""A record's condition as typed clauses (paper §3.3, Appendix B.2; issue 38 item 1): one parser,
one printer that reproduces every stored text, ``derive`` through a domain's names hook, and
names the text form cannot hold refused and counted, never silently dropped."""
import ast
import asyncio
import pathlib
import re
import types

import pytest

from helpers import paper

from countermem_jax.domains import SQL, sql_names
from countermem_jax.domains.base import TEXT_NAMES, Domain
from countermem_jax.method import conditions
from countermem_jax.method.agents import TaskContext
from countermem_jax.method.conditions.text import normalize_condition
from countermem_jax.method.conditions import (Compare, Condition, DraftHas, DraftLacks,
                                              EditNames, EditTouches, Environment,
                                              FeedbackContains, FreeText, Has, OneOf,
                                              RequestContains, TaskFacts, derive, parse)
from countermem_jax.method.counterfactual import CounterfactualBuilder
from countermem_jax.method.prompting.prompts import Parsed
from countermem_jax.method.conditions.checkers import RuleChecker
from evaluators.base import Outcome, State, Task

TESTS = pathlib.Path(__file__).resolve().parent
METHOD = TESTS.parent / "countermem_jax" / "method"

# Every condition the tests' stored records carry (``make_record(condition=...)``, the fake
# distillations, the conditions old tests expect ``derive`` to write): their text must load and
# print back unchanged.
STORED = [
    "bound == inclusive", "draft has [age]", "the request is about singers",
    "the question asks about cars", "the request is about table t3", "c1", "mine", "x",
    "environment == poker_player",
    "environment == pets_1 AND draft has [petage] AND draft lacks [pet_age]",
    'environment == pets_1 AND feedback contains "no such column"',
    "environment == poker_player AND edit touches [name] AND edit touches any [people, "
    "poker_player]",
    "environment == cs AND edit touches any [concert, singer] AND draft has [concert, singer_id]",
    "environment == poker_player AND edit touches [birth_date] AND edit touches any "
    "[people, poker_player] AND draft lacks [people, people_id]",
    "environment == tv AND edit touches [directed_by] AND draft has [director] AND "
    "draft lacks [directed_by]",
    "edit touches any []",
    'environment == poker_player AND feedback contains "no such column" AND draft has any '
    "[people, poker_player] AND draft lacks [people, people_id]",
    'environment == pets_1 AND feedback contains "no such column" AND draft has [pet_type] AND '
    "draft lacks [pettype]",
    "environment == db AND edit touches any []", "bound == strict AND bound == inclusive",
    "environment == people AND edit touches any []",
    "environment == tvshow AND edit touches [written_by] AND draft has [directed_by] AND draft "
    "lacks [written_by]",
]

# Edits the tests derive conditions from: (domain names, original, improved, environment, feedback)
EDITS = [
    (SQL.names, "SELECT T1.name FROM poker_player AS T1 JOIN people AS T2 ON T1.people_id = "
     "T2.people_id", "SELECT T2.name FROM poker_player AS T1 JOIN people AS T2 ON T1.people_id = "
     "T2.people_id", "poker_player", ""),
    (SQL.names, "SELECT Birth_Date FROM poker_player ORDER BY Earnings",
     "SELECT people.Birth_Date FROM poker_player JOIN people ON poker_player.people_id = "
     "people.people_id ORDER BY Earnings", "poker_player",
     "SQL error: OperationalError: no such column: Birth_Date"),
    (SQL.names, "SELECT PetType, weight FROM Pets ORDER BY PetAge ASC LIMIT 1",
     "SELECT PetType, weight FROM Pets ORDER BY Pets.pet_age ASC LIMIT 1", "pets_1", ""),
    (SQL.names, "SELECT name FROM singer WHERE age > 18", "SELECT name FROM singer WHERE age >= 18",
     "singer", ""),
    (SQL.names, "SELECT name FROM people WHERE city = 'Paris'",
     "SELECT name FROM people WHERE city = 'Ben Jones'", "people", ""),
    (SQL.names, "SELECT 1", "SELECT 2", "", ""),
    (SQL.names, "SELEC nonsense ((", "SELECT a FROM t", "db", ""),
    (SQL.names, "SELECT " + "(" * 60 + "1" + ")" * 60, "SELECT " + "(" * 60 + "1" + ")" * 60
     + " LIMIT 1", "db", ""),
    (TEXT_NAMES, "def f(x, n):\n    if x < n:\n        return x\n",
     "def f(x, n):\n    if x <= limit:\n        return x\n", "", ""),
    (TEXT_NAMES, "if x < n:", "if x <= n:", "", ""),
]


def _fixture_conditions() -> list[str]:
    """Every condition a test file gives a record as a literal (``condition="..."``), in the form a
    loaded record holds it (``normalize_condition``), this file's own aside."""
    found = set()
    for path in sorted(TESTS.glob("*.py")):
        if path.name == pathlib.Path(__file__).name:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.keyword) and node.arg == "condition"):
                continue
            values = ([node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp)
                      else [node.value])   # ``condition="c" if i else ""``
            found.update(normalize_condition(v.value) for v in values
                         if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return sorted(found)


def test_the_fixtures_hold_conditions_of_every_kind():
    assert {"", "bound == inclusive", "draft has [age]", "the request is about singers",
            'environment == pets_1 AND feedback contains "no such column"'} <= set(
        _fixture_conditions())


@pytest.mark.parametrize("text", sorted(set(STORED) | set(_fixture_conditions())))
def test_a_stored_condition_prints_back_byte_for_byte(text):
    condition = parse(text)
    assert str(condition) == text
    assert parse(str(condition)) == condition


@pytest.mark.parametrize("edit", EDITS, ids=range(len(EDITS)))
def test_a_derived_condition_reads_back_as_the_same_clauses(edit):
    derivation = derive(*edit)
    text = str(derivation)
    assert parse(text) == derivation.condition and str(parse(text)) == text


def test_the_parser_gives_each_clause_its_type():
    condition = parse('environment == pets_1 AND feedback contains "no such column" AND draft '
                      "has any [people, cars] AND draft lacks [pet_age] AND edit touches [age] "
                      "and bound in [inclusive, strict] && has distinct AND not aggregate AND "
                      "ordering != desc AND question contains 'at least' AND the request is long")
    assert condition.clauses == (
        Environment("pets_1"), FeedbackContains("no such column"),
        DraftHas(("people", "cars"), any_=True), DraftLacks(("pet_age",)), EditTouches(("age",)),
        OneOf("bound", ("inclusive", "strict")), Has("distinct"), Has("aggregate", present=False),
        Compare("ordering", "!=", "desc"), RequestContains("question", "at least", "'"),
        FreeText("the request is long"))
    assert condition.free_text and not parse("bound == inclusive").free_text
    assert parse("") == parse(None) == Condition()


def test_a_free_text_clause_leaves_the_whole_condition_to_the_judge():
    task = TaskFacts("q", "List people aged at least 30", {"bound": "inclusive"})
    assert conditions.check(parse("bound == inclusive"), task) is True
    assert conditions.check(parse("bound == inclusive AND the request asks for ages"), task) is None
    assert RuleChecker().check("bound == strict AND the request asks for ages", task) is None


def test_a_name_the_text_cannot_hold_is_counted_not_silently_dropped():
    derivation = derive(SQL.names, "SELECT name FROM people WHERE city = 'Rome'",
                        "SELECT name FROM people WHERE city = 'Paris, France'", "people")
    # the text stored before issue 38, unchanged; the literal is named in ``unlisted``
    assert str(derivation) == "environment == people AND edit touches [city] AND draft has [rome]"
    assert derivation.unlisted == ("paris, france", "paris, france")
    for name in ("a, b", "x [y]", "tom and jerry", "and y", "line\nbreak", " padded", ""):
        assert not conditions.listable(name), name
    assert conditions.listable("ben jones") and conditions.listable("o'brien")


@pytest.mark.parametrize("clause", [EditTouches(("a, b",)), DraftHas((" x",)),
                                    DraftLacks(("x and y",)), Environment("db and x"),
                                    FeedbackContains("a\nb")])
def test_the_printer_refuses_a_clause_that_would_read_back_differently(clause):
    with pytest.raises(ValueError, match="read"):
        str(Condition((clause,)))


def test_derive_asks_the_domain_hook_and_knows_no_domain():
    class Tokens:
        """A made-up domain whose actions are space-separated tokens."""

        def edit_names(self, original, improved, feedback=""):
            return EditNames(every=frozenset(improved.split()) - set(original.split()),
                             feedback_kind="timeout" if "timed out" in feedback else "")

        def action_names(self, action):
            return frozenset(action.split())
    derivation = derive(Tokens(), "a b", "a c", "env", "check timed out")
    assert str(derivation) == ('environment == env AND feedback contains "timeout" AND draft '
                               "has [b] AND draft lacks [c]")
    assert str(derive(Tokens(), "a b", "a c", "")) == \
        "edit touches [c] AND draft has [b] AND draft lacks [c]"
    assert Domain("toy", "", "", lambda task, action: []).names is TEXT_NAMES
    assert SQL.names is sql_names.SQL_NAMES


def test_the_method_holds_no_sql():
    found = [f"{p.relative_to(METHOD)}:{n}" for p in sorted(METHOD.rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r'sqlglot|domain == "sql"', line)]
    assert found == []


def test_the_refused_reason_comes_from_the_sql_hook_only():
    deep = "SELECT " + "(" * 60 + "1" + ")" * 60
    assert derive(SQL.names, deep, deep + " LIMIT 1", "db").refused == "nested deeper than 32"
    assert derive(TEXT_NAMES, deep, deep + " LIMIT 1", "db").refused == ""
    assert derive(SQL.names, "SELEC nonsense ((", "SELECT 1", "db").refused == ""


def test_construction_logs_the_names_a_derived_condition_left_out():
    """A record whose distillation failed gets the derived condition; the construction event
    says which names no condition text could hold (``condition_unlisted``)."""
    task = Task("t", "sql", "spider", "Names of people from Paris, France", "", "predicate",
                environment="people")
    proposed = []

    async def llm(ctx, template, fields, parse_args=None):
        return Parsed(False, None, "not a record", 2)

    class Store:
        snapshot_id = "s"

        def propose(self, record):
            proposed.append(record)
            return types.SimpleNamespace(admitted=True, reason="admitted", score=1.0), []
    agent = types.SimpleNamespace(llm=llm, domain=SQL, backbone=types.SimpleNamespace(
        model_name="m"), evaluator=types.SimpleNamespace(
        name="sql", version="1", environment_digest=lambda task: ""))
    builder = CounterfactualBuilder(agent, Store(), paper("construction"))
    ctx = TaskContext(task, "construction", "r", State(task), 100, 10_000, 3)
    failed, passed = Outcome(0.0, False, True, "Wrong result"), Outcome(1.0, True, True, "ok")
    entry = asyncio.run(builder._distil_and_admit(
        ctx, "SELECT name FROM people WHERE city = 'Rome'", failed,
        "SELECT name FROM people WHERE city = 'Paris, France'", passed))
    assert entry["distil_fallback"] and entry["admitted"]
    assert entry["condition"] == proposed[0].condition == \
        "environment == people AND edit touches [city] AND draft has [rome]"
    assert entry["condition_unlisted"] == ["paris, france", "paris, france"]
    assert "condition_from_text" not in entry
