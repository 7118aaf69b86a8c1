"""Modules I–II as three steps (paper §3.2–3.3): ``propose`` makes the local candidates and checks
none of them; ``expand`` checks each from the state before the failed action and admits the
verified ones; the construction phase's tally counts what the log says of them."""
import asyncio
import sqlite3
import types

import pytest

from helpers import paper

from countermem_jax.domains import sql as sql_domain
from countermem_jax.method.agents import TaskContext
from countermem_jax.method.counterfactual import NEVER_HOLDS, CounterfactualBuilder
from countermem_jax.method.memory.scoring import AdmissionDecision
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.method.prompting.prompts import Parsed
from countermem_jax.protocol.construction_tally import empty_store_reason, tally
from evaluators.base import Task
from evaluators.sql import SQLEvaluator
from evaluators.sql.checker import SQLReference

DRAFT = "SELECT name FROM people WHERE age > 30"
LOCAL = "SELECT name FROM people WHERE age >= 30"
REWRITE = "SELECT name FROM people WHERE age >= 30 UNION SELECT name FROM people WHERE age = 30"


@pytest.fixture
def people(tmp_path):
    path = tmp_path / "people.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE people (name TEXT, age INTEGER);"
                       "INSERT INTO people VALUES ('Ann', 30), ('Bo', 41), ('Cy', 12);")
    conn.commit()
    conn.close()
    task = Task("t1", "sql", "spider", "Names of people aged at least 30.", "", "predicate",
                reference=SQLReference("SELECT name FROM people WHERE age >= 30", str(path),
                                       "spider"))
    return task, SQLEvaluator(timeout_s=2.0)


class _Store:
    """Admits every record it is offered and remembers it (the builder's store interface)."""
    snapshot_id = "s"

    def __init__(self):
        self.offered = []

    def propose(self, record):
        self.offered.append(record)
        return AdmissionDecision(True, "admitted", 1.0, 1.0), []


def _builder(ev, replies, checks):
    """A builder over the real SQL checker whose backbone answers GENERATE_LOCAL_ALTERNATIVES
    with ``replies`` and DISTIL_RECORD with a situation and condition; every check is counted
    in ``checks``."""
    async def llm(ctx, template, fields, parse_args=None):
        if template.name == "GENERATE_LOCAL_ALTERNATIVES":
            return Parsed(True, list(replies), "", 1)
        return Parsed(False, None, "no reply", 1)   # distillation falls back to the edit

    async def check(state, action):
        checks.append(action)
        return ev.evaluate(state, action)

    domain = types.SimpleNamespace(ranked_edits=None, rule_edits=lambda task, action: [],
                                   condition_hint=sql_domain.SQL.condition_hint,
                                   names=sql_domain.SQL.names)
    agent = types.SimpleNamespace(llm=llm, check=check, domain=domain, evaluator=ev,
                                  failures=ParseFailureLog(),
                                  backbone=types.SimpleNamespace(model_name="m"))
    return CounterfactualBuilder(agent, _Store(), paper("construction"))


def test_propose_checks_nothing_and_refuses_an_edit_that_is_not_local(people):
    task, ev = people
    checks = []
    builder = _builder(ev, [LOCAL, REWRITE], checks)
    ctx = TaskContext(task, "construction", "r", ev.reset(task), 100, 10_000, 3)
    outcome = ev.evaluate(ev.reset(task), DRAFT)
    candidates, sources, screened = asyncio.run(builder.propose(ctx, DRAFT, outcome))
    assert (candidates, sources, screened) == ([LOCAL], ["llm"], [])
    assert checks == [] and ctx.cf_checks == 0 and ctx.calls == 0
    refused = builder.agent.failures.items
    assert [f["kind"] for f in refused] == ["not_local"] and refused[0]["reply"] == REWRITE


def test_expand_checks_each_candidate_from_the_state_before_and_admits_the_better_one(people):
    task, ev = people
    checks = []
    builder = _builder(ev, [LOCAL], checks)
    ctx = TaskContext(task, "construction", "r", ev.reset(task), 100, 10_000, 3)
    before = ev.reset(task)
    outcome = ev.evaluate(before, DRAFT)
    entries = asyncio.run(builder.expand(ctx, before, DRAFT, outcome))
    assert checks == [LOCAL] and ctx.cf_checks == 1
    assert [(e["candidate"], e["delta"], e["admitted"]) for e in entries] == [(LOCAL, 1.0, True)]
    (record,) = builder.store.offered
    assert (record.original_action, record.improved_action) == (DRAFT, LOCAL)
    # the same failure again: Module I is not asked twice, nothing is checked again
    assert asyncio.run(builder.expand(ctx, before, DRAFT, outcome)) == [] and checks == [LOCAL]


EVENTS = [  # the "counterfactual" events of one build, as the builder logs them
    {"candidate": "a", "source": "llm", "checked": False, "screened": True},
    {"candidate": "b", "source": "llm", "utility": 1.0, "completed": True, "delta": 1.0,
     "admitted": True, "reason": "admitted", "situation_repeated": True},
    {"candidate": "c", "source": "boundary", "utility": 0.0, "completed": True, "delta": 0.0},
    {"candidate": "d", "source": "boundary", "utility": 1.0, "completed": True, "delta": 1.0,
     "admitted": False, "reason": NEVER_HOLDS},
]
FAILURES = [{"template": "DISTIL_RECORD", "kind": "parse"},
            {"template": "GENERATE_LOCAL_ALTERNATIVES", "kind": "not_local"},
            {"template": "GENERATE_LOCAL_ALTERNATIVES", "kind": "content"}]


def test_the_tally_counts_checks_verified_admitted_and_refused_per_source():
    t = tally(EVENTS, FAILURES)
    assert t["sources"] == {"boundary": {"checks": 2, "verified": 1, "screened": 0},
                            "llm": {"checks": 1, "verified": 1, "screened": 1}}
    assert (t["checks"], t["verified"], t["admitted"]) == (3, 2, 1)
    assert (t["never_holds"], t["repeated_situations"], t["not_local"]) == (1, 1, 1)
    assert t["unparseable"] == {"DISTIL_RECORD": 1}
    assert t["no_usable_content"] == {"GENERATE_LOCAL_ALTERNATIVES": 1}


def test_the_empty_store_line_names_every_count_of_the_tally():
    line = empty_store_reason(tally(EVENTS, FAILURES))
    assert line == ("the store is empty: 2 of 3 counterfactual checks verified (verified/checks "
                    "per source: boundary 1/2, llm 1/1), 1 refused for a condition that never "
                    "holds, 1 replies unparseable (DISTIL_RECORD 1), 1 well-formed replies with "
                    "no usable content, 1 model edits not local, 1 screened out before a check")
