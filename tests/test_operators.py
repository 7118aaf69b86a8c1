"""Module I's rule-based edit operators, in their domain modules: one decision unit per edit,
never a rewrite; the SQL ones read the schema through the SQL domain, not the database file."""
import sqlite3
import time
import types

import pytest
import sqlglot

from countermem_jax.domains import coding, sat, smt
from countermem_jax.domains import sql as sql_domain
from countermem_jax.method.prompting.parsers import is_local_edit
from evaluators.sql import schema_columns


def test_sql_operators_cover_the_named_edit_kinds():
    sql = ("SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = "
           "T2.stadium_id WHERE T1.year > 2014 GROUP BY T2.name ORDER BY count(*) DESC LIMIT 1")
    edits = sql_domain.sql_edits(sql, limit=20)
    text = "\n".join(edits)
    assert "T1.year >= 2014" in text                       # comparison boundary
    assert "SELECT DISTINCT" in text                       # DISTINCT
    assert "SELECT COUNT(DISTINCT pettype) FROM pets" in sql_domain.sql_edits("SELECT count(pettype) FROM pets")
    assert any("ORDER BY COUNT(*) LIMIT" in e or "ASC" in e for e in edits)  # direction flip
    assert any("LIMIT" not in e for e in edits)            # LIMIT removed
    assert any("GROUP BY" not in e for e in edits)         # GROUP BY removed
    for e in edits:
        sqlglot.parse_one(e, read="sqlite")
        assert is_local_edit(sql, e), e


def test_sql_join_key_edit_uses_the_schema(benchdata):
    db = str(benchdata / "spider/database/concert_singer/concert_singer.sqlite")
    sql = "SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.capacity"
    edits = sql_domain.sql_edits(sql, schema_columns(db), 20)
    assert any("T1.stadium_id = T2.stadium_id" in e for e in edits)


def test_sql_operator_fixes_a_boundary_slip():
    assert "SELECT name FROM people WHERE age >= 18" in sql_domain.sql_edits(
        "SELECT name FROM people WHERE age > 18")


def test_sat_and_smt_operators():
    assert "solver: cadical195" in sat.sat_strategy_edits("solver: glucose4")
    assert "solver: glucose4" in sat.sat_strategy_edits("solver: glucose4\nassumptions: 1 -2")
    cnf = "c var 1 x\np cnf 2 3\n1 2 0\n-1 0\n2 0\n"
    assert any("p cnf 2 2" in e for e in sat.sat_encoding_edits(cnf))
    assert "solver: cvc5" in smt.smt_solver_edits("solver: z3\ntactics: smt")
    assert "(assert (> x 3))" in smt.smt_encoding_edits("(assert (>= x 3))")


def test_python_operators_edit_only_the_given_lines():
    src = "def f(xs, n):\n    for i in range(n):\n        if xs[i] < 0 and i > 1:\n            return i\n"
    edits = coding.python_edits(src, [3])
    assert any("xs[i] <= 0" in e for e in edits) and any(" or " in e for e in edits)
    for e in edits:
        assert e.splitlines()[1] == src.splitlines()[1] and e.splitlines()[0] == src.splitlines()[0]


def test_schema_linking_column_swap_follows_the_question(benchdata):
    db = str(benchdata / "spider/database/concert_singer/concert_singer.sqlite")
    edits = sql_domain.sql_edits("SELECT Song_Name FROM singer WHERE Age > 20",
                                 schema_columns(db), 12,
                                 question="What are the names of singers older than 20?")
    assert "select name from singer where age > 20" in [e.lower() for e in edits]
    assert all("where name" not in e.lower() for e in edits)  # only answer columns are swapped


def test_schema_edits_drop_an_unused_join_and_swap_the_table(benchdata):
    tv = str(benchdata / "spider/database/tvshow/tvshow.sqlite")
    sql = ("SELECT TV_series.Episode, TV_series.Rating FROM TV_series JOIN Cartoon ON "
           "TV_series.id = Cartoon.Channel ORDER BY TV_series.Rating DESC LIMIT 3")
    assert ("SELECT TV_series.Episode, TV_series.Rating FROM TV_series ORDER BY TV_series.Rating "
            "DESC LIMIT 3") in sql_domain.sql_edits(sql, schema_columns(tv), 4,
                                                    "List the top 3 TV series.")
    used = "SELECT T1.Title FROM Cartoon AS T1 JOIN TV_Channel AS T2 ON T1.Channel = T2.id WHERE T2.Country = 'Italy'"
    assert all("JOIN" in e for e in sql_domain.sql_edits(used, schema_columns(tv), 20,
                                                         "cartoons on Italian channels")
               if "WHERE" in e)
    poker = str(benchdata / "spider/database/poker_player/poker_player.sqlite")
    edits = sql_domain.sql_edits("SELECT Nationality FROM poker_player GROUP BY Nationality "
                                 "ORDER BY COUNT(*) DESC LIMIT 1", schema_columns(poker), 4,
                                 "Give the nationality that is most common across all people.")
    assert edits[0] == "SELECT Nationality FROM people GROUP BY Nationality ORDER BY COUNT(*) DESC LIMIT 1"


@pytest.mark.parametrize("sql", [
    "SELECT " + "(" * 50 + "a" + ")" * 50 + " FROM t WHERE a > 1",        # RecursionError in sqlglot
    "SELECT a FROM t WHERE a > 1 AND b IN (" + ", ".join(map(str, range(14000))) + ")",  # 80 KB
], ids=["50-nested-parentheses", "80kb-in-list"])
def test_sql_operators_never_raise_on_queries_sqlite_accepts(sql):
    sqlite3.connect(":memory:").execute("CREATE TABLE t(a, b)").connection.execute(sql)
    start = time.perf_counter()
    edits = sql_domain.sql_edits(sql, limit=4)
    assert time.perf_counter() - start < sql_domain.SQL_EDIT_SECONDS + 1.0
    assert edits and all(">=" in e or "(" in e for e in edits)
    assert len(edits) <= 4


def test_sql_rule_edits_ask_the_sql_evaluator_for_the_schema(monkeypatch):
    """The SQL domain is the one door to ``evaluators/sql``: its rule edits get the schema from
    ``evaluators.sql.schema_columns`` (here a stand-in), never by opening the database file."""
    import evaluators.sql
    asked = []

    def schema(db_path):
        asked.append(db_path)
        return {"concert": ("stadium_id", "year"), "stadium": ("stadium_id", "capacity")}
    monkeypatch.setattr(evaluators.sql, "schema_columns", schema)
    task = types.SimpleNamespace(reference=types.SimpleNamespace(db_path="/nonexistent/x.sqlite"),
                                 prompt="Which stadiums?")
    sql = "SELECT T2.capacity FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.capacity"
    edits = sql_domain.SQL.rule_edits(task, sql)
    assert asked == ["/nonexistent/x.sqlite"]
    assert any("T1.stadium_id = T2.stadium_id" in e for e in edits)


def test_sql_rule_edits_without_a_readable_database_skip_the_schema_edits():
    task = types.SimpleNamespace(reference=types.SimpleNamespace(db_path="/nonexistent/x.sqlite"),
                                 prompt="Which stadiums?")
    sql = "SELECT T2.capacity FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.capacity"
    assert sql_domain.SQL.rule_edits(task, sql) == sql_domain.sql_edits(sql, None, 8)


def test_sql_rule_edits_are_computed_once_per_query_schema_and_question(monkeypatch):
    """A construction task re-run in a wave expands the same failure again: the second time
    the edits come from memory (sqlglot parses once), equal to the first; another schema for
    the same query is computed anew."""
    import evaluators.sql
    schemas = {"/a.sqlite": {"concert": ("stadium_id", "year")},
               "/b.sqlite": {"concert": ("stadium_id", "capacity")}}
    monkeypatch.setattr(evaluators.sql, "schema_columns", schemas.__getitem__)
    parses = []
    parse = sqlglot.parse_one
    monkeypatch.setattr(sqlglot, "parse_one", lambda *a, **k: parses.append(a[0]) or parse(*a, **k))
    sql = "SELECT year FROM concert WHERE stadium_id > 7 ORDER BY year"

    def task(db):
        return types.SimpleNamespace(reference=types.SimpleNamespace(db_path=db),
                                     prompt="Which years had concerts after stadium 7?")
    first = sql_domain.SQL.rule_edits(task("/a.sqlite"), sql)
    again = sql_domain.SQL.rule_edits(task("/a.sqlite"), sql)
    other = sql_domain.SQL.rule_edits(task("/b.sqlite"), sql)
    assert first == again and first and parses.count(sql) == 2  # for /a and /b, not again
    assert first == sql_domain.sql_edits(sql, schemas["/a.sqlite"],
                                         question="Which years had concerts after stadium 7?")
    assert other is not first
