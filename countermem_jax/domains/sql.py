"""Text-to-SQL (Spider, BIRD; paper Appendix D.1): the SQL domain and its loaders.

This module is the one door from the method to ``evaluators/sql``: the Spider and BIRD loaders,
the SQL checker, the action format (a ```sql block, cut to its one statement by
``extract_sql``), and Module I's SQL rule edit operators (paper §3.2, Appendix B.4), which get the
database schema they need from ``evaluators.sql.schema_columns`` rather than opening the
database themselves.

Module I takes its operator edits from ``ranked_edits`` (``sql_operators``: error repair, schema
and value linking, joins, and the rule edits below as one family, ranked on the task's database
without its reference). The rule operators fill the candidate slots the LLM's own edits leave
free, up to K = 4, where no database can be read. Each changes
exactly one decision unit of the failed action (sqlglot ASTs): comparison boundaries, DISTINCT,
aggregates, join keys, ORDER BY direction, LIMIT, GROUP BY, and schema linking: dropping an
unused join, and swapping a table or an answer column for one the question names.

Every operator is deterministic and ordered, so the same failed query always yields the same
candidates in the same slots: construction is reproducible from the response cache, and the
construction waves commit the same store as a one-task-at-a-time run.
"""
import functools
import itertools
import re
import sqlite3
import time
from typing import Mapping

import sqlglot

from countermem_jax.domains.base import (Domain, data_dir, distinct_edits, require,
                                         require_setting)
from countermem_jax.domains import sql_operators as operators
from countermem_jax.domains.sql_operators import (_column_swap_variants, _drop_join_variants,
                                                  _table_swap_variants, _variants)
from countermem_jax.domains.sql_names import SQL_NAMES
from countermem_jax.runtime.paths import data_root

SQL_PARSE_LIMIT = 20_000  # characters; longer queries (e.g. huge IN-lists) get the regex edits
SQL_EDIT_SECONDS = 2.0    # time bound on generating the AST edits of one query


def sql_edits(sql: str, schema: Mapping[str, tuple[str, ...]] | None = None, limit: int = 8,
              question: str = "") -> list[str]:
    """Up to ``limit`` one-change edits of ``sql`` (Module I's SQL rule operators). ``schema``
    (lower-cased table -> its columns, from ``task_schema``) enables the join-key edits and, with
    the ``question``, the schema-linking edits. Never raises on a query SQLite accepts:
    queries sqlglot cannot parse, nests too deeply for (RecursionError), or that are longer than
    SQL_PARSE_LIMIT get the boundary edits found by a regular expression instead, and AST edits
    stop after SQL_EDIT_SECONDS."""
    if len(sql) <= SQL_PARSE_LIMIT:
        try:
            return _ast_edits(sql, schema, limit, question, time.monotonic() + SQL_EDIT_SECONDS)
        except (RecursionError, sqlglot.errors.ParseError, sqlglot.errors.TokenError):
            pass
    return distinct_edits(sql, _regex_boundary_edits(sql))[:limit]


def _ast_edits(sql, schema, limit, question, deadline) -> list[str]:
    """The AST edits in priority order: a join too many first, then schema linking (the commonest
    small-model mistakes on Spider), then the generic one-change edits. At most 3 x ``limit``
    are printed before de-duplication, so a query with many comparisons stays cheap."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    out = []
    schema_edits = (itertools.chain(_table_swap_variants(tree, schema, question),
                                    _column_swap_variants(tree, schema, question))
                    if schema and question else ())
    for variant in itertools.chain(_drop_join_variants(tree), schema_edits,
                                   _variants(tree, schema)):
        try:
            out.append(variant.sql(dialect="sqlite"))
        except Exception:  # an edit sqlglot cannot print is skipped
            continue
        if len(out) >= 3 * limit or time.monotonic() > deadline:
            break
    if "nulls" not in sql.lower():  # sqlglot spells out SQLite's default NULL ordering on a flip
        out = [re.sub(r"\s+NULLS (FIRST|LAST)", "", o) for o in out]
    return distinct_edits(tree.sql(dialect="sqlite"), distinct_edits(sql, out))[:limit]


def _regex_boundary_edits(text: str) -> list[str]:
    """Each comparison operator flipped between strict and inclusive, found without parsing."""
    out = []
    for m in re.finditer(r"(>=|<=|>|<)", text):
        op = {">=": ">", "<=": "<", ">": ">=", "<": "<="}[m.group(1)]
        out.append(text[: m.start()] + op + text[m.end():])
    return out


def task_schema(task) -> dict[str, tuple[str, ...]] | None:
    """The schema of a SQL task's database (lower-cased table -> columns), as the SQL evaluator
    reads it; None for a task without a database or one that cannot be read."""
    from evaluators.sql import schema_columns
    db_path = getattr(task.reference, "db_path", None)
    if not db_path:
        return None
    try:
        return schema_columns(db_path)
    except sqlite3.Error:
        return None


def rule_edits(task, action: str) -> list[str]:
    """Module I's SQL rule edits of a failed query, schema-linked to the task's question."""
    schema = task_schema(task)
    frozen = None if schema is None else tuple(sorted(schema.items()))
    return list(_rule_edits_of(action, frozen, task.prompt))


@functools.lru_cache(maxsize=4096)
def _rule_edits_of(action: str, schema: tuple | None, question: str) -> tuple[str, ...]:
    """``sql_edits`` of ``action`` for a schema (sorted (table, columns) pairs) and question,
    computed once per process: a construction task re-run in a wave (``construction_waves``)
    expands the same failure again, and parsing and printing the edits with sqlglot costs
    10-20 ms of the event loop a time."""
    return tuple(sql_edits(action, None if schema is None else dict(schema), question=question))


def ranked_edits(task, action: str, outcome, proposed=(), k: int = 4) -> list[tuple[str, str]]:
    """Module I's candidates for a failed ``action`` (``sql_operators``): at most ``k`` (edit,
    source) pairs, the model's ``proposed`` edits that run and change the draft's result first
    ("llm"), then the operators' families, screened and ranked on the task's database without its
    reference. Only the database path is read from the task's reference; the question and the
    checker's error message come with it. Without a database the model's edits go unscreened,
    followed by the rule edits."""
    db_path = getattr(task.reference, "db_path", None)
    unscreened = [(edit, "llm") for edit in proposed]
    if not db_path or len(action) > SQL_PARSE_LIMIT:
        return (unscreened + [(edit, "rules") for edit in rule_edits(task, action)])[:k]
    error = (outcome.details or {}).get("error") or outcome.feedback
    ranked = _ranked_edits_of(action, str(db_path), task.prompt, error, tuple(proposed), k)
    return list(ranked) if ranked is not None else unscreened[:k]


@functools.lru_cache(maxsize=4096)
def _ranked_edits_of(action, db_path, question, error, proposed, k):
    """Cached per failure: a task re-run in a construction wave expands the same failure again.
    None when the database cannot be read or sqlglot cannot handle the query."""
    from evaluators.sql.probe import Database
    try:
        return tuple((c.sql, c.family) for c in operators.ranked_edits(
            action, db=Database(db_path), question=question, error=error, proposed=proposed, k=k))
    except (sqlite3.Error, RecursionError, sqlglot.errors.SqlglotError):
        return None


def extract_sql(text: str) -> str:
    """The SQL statement in a model reply: inside a code fence if there is one, from the first
    SELECT/WITH, up to the first semicolon that ends a statement."""
    # Only a semicolon that ends a line closes the statement, so one inside a string literal
    # does not cut the query short.
    fence = re.search(r"```(?:sql|sqlite)?\s*\n?(.*?)```", text, re.S | re.I)
    body = fence.group(1) if fence else text
    m = re.search(r"\b(with|select)\b", body, re.I)
    if not m:
        return body.strip()
    sql = body[m.start():]
    end = re.search(r";\s*(\n|$)", sql)
    if end:
        sql = sql[: end.start()]
    return sql.strip()


def question_features(question: str) -> dict:
    """The rule-checkable features of a question (bound, distinct, aggregate, ordering, ...) as
    ``evaluators/sql/features.py`` computes them: what a task built outside a loader (the
    transfer study's look-alike targets, Appendix D.4) carries so conditions are decided by rule."""
    from evaluators.sql.features import question_features as features
    return features(question)


# The condition hint names the question features ``evaluators/sql/features.py`` computes, so
# a distilled condition written with them is decided by the rule checker on a new task instead
# of the LLM judge (``method/conditions``, Module III's compatibility filter). A condition
# derived from a verified edit reads the query's tables, columns and literals (``sql_names``).
# The comparison rule is stated here, the same for every question, and never in the checker's
# feedback (which would tell, question by question, a property of the reference).
SQL = Domain(
    "sql",
    "Write the SQLite query that answers the question. Its result is compared with the expected "
    "result as a bag of rows, columns in any order; the row order counts only where the question "
    "asks for the rows in an order.",
    "Prefer a condition written as a rule over the question's features, e.g. 'bound == inclusive', "
    "'bound == strict', 'distinct == true', 'aggregate == count', 'ordering == desc', "
    "'db_id == <name>', or 'question contains \"<phrase>\"'.",
    rule_edits, fences=("sql", "sqlite"), extract=extract_sql, ranked_edits=ranked_edits,
    names=SQL_NAMES)


# --- Loaders (Appendix D.1: Spider, BIRD) ----------------------------------------------------

def _db_ids(data_cfg):
    """The databases a config restricts the tasks to (None: all)."""
    return set(data_cfg.db_ids) if data_cfg.get("db_ids") else None


def data_error() -> type:
    """The SQL loaders' error for missing or malformed files and unknown ``data.db_ids``: the
    user's input (``domains.DATA_ERRORS``)."""
    from evaluators.sql.loaders import DataError
    return DataError


def spider_tasks(data_cfg):
    """Spider's tasks (``dev`` by default) from the official layout."""
    from evaluators.sql import load_spider
    root = require(data_dir(data_cfg, "spider"), "spider",
                   "Spider (dev.json, tables.json, database/)")
    return load_spider(root, data_cfg.get("split", "dev"), db_ids=_db_ids(data_cfg))


def bird_tasks(data_cfg):
    """BIRD mini-dev's tasks; the dev databases come from ``data_cfg.bird_db_root``."""
    from evaluators.sql import load_bird
    questions = require(data_cfg.get("bird_json") or
                        data_root() / "bird_minidev/mini_dev_sqlite.json",
                        "bird", "BIRD mini-dev questions")
    databases = require_setting(
        data_cfg, "bird_db_root", "bird", "BIRD dev_databases",
        "bird: the dev databases are not in the data registry's archives; "
        "`python -m countermem_jax.data fetch bird` says how to get them, then "
        "pass --config.data.bird_db_root=/path/to/dev_databases")
    return load_bird(questions, databases, db_ids=_db_ids(data_cfg))


def sql_evaluator(default_timeout_s: float):
    """A builder of the SQL checker with a per-query timeout (``check_timeout_s`` overrides).
    The checker compares results with the reference query's (Appendix D.1: successful
    execution alone is not success)."""
    def make(data_cfg):
        from evaluators.sql import SQLEvaluator
        return SQLEvaluator(timeout_s=data_cfg.get("check_timeout_s", default_timeout_s))
    return make
