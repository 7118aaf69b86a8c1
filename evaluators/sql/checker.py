"""Execution-based SQL checker for Spider and BIRD."""
import collections
import dataclasses
import hashlib
import itertools
import os
import re
import sqlite3
import threading
import time

import sqlglot
from sqlglot.tokens import TokenType

from evaluators.base import Evaluator, Outcome, Task, truncate

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
_BLOCKED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}


@dataclasses.dataclass(frozen=True)
class SQLReference:
    """What the checker needs: the gold query, the database file and the comparison rule."""
    gold_sql: str
    db_path: str
    comparison: str  # "spider" (multiset / ordered) or "bird" (set)


class QueryError(Exception):
    pass


_FORMAT_SPEC = re.compile(r"%[-+ 0#,!]*(\*|\d+)?(?:\.(\*|\d+))?[a-zA-Z%]")
PRINTF_LIMIT = 1_000_000   # largest width or precision printf/format may use


def _as_int(value) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return 0


def _guarded_printf(local: threading.local):
    """SQLite's printf/format behind a check of every width and precision: SQLite pads
    ``%.*c`` one character at a time without looking at its deadline (1e9 takes ~17 s), so
    larger ones are refused before the built-in (on a private in-memory connection) runs."""
    def printf(fmt, *args):
        if isinstance(fmt, str):
            star_args = iter(args)
            for spec in _FORMAT_SPEC.finditer(fmt):
                for part in spec.groups():
                    value = next(star_args, 0) if part == "*" else part
                    if part is not None and abs(_as_int(value)) > PRINTF_LIMIT:
                        raise ValueError(f"printf width or precision above {PRINTF_LIMIT}")
                if spec.group(0) != "%%" and spec.group(0)[-1] != "%":
                    next(star_args, None)
        conn = local.__dict__.setdefault("printf_conn", sqlite3.connect(":memory:"))
        marks = ", ".join("?" * (len(args) + 1))
        return conn.execute(f"SELECT printf({marks})", (fmt, *args)).fetchone()[0]
    return printf


def _authorizer(action, arg1, arg2, db_name, trigger):
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _BLOCKED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def gold_orders(gold_sql: str) -> bool:
    """True when the gold query's outermost statement has ORDER BY (order then matters)."""
    try:
        tree = sqlglot.parse_one(gold_sql, read="sqlite")
        return tree.args.get("order") is not None
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        depth, text = 0, gold_sql.lower()
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and text.startswith("order by", i):
                return True
        return False


def without_distinct(sql: str) -> str:
    """``sql`` with every DISTINCT keyword removed, as test-suite-sql-eval's ``remove_distinct``
    does to both queries (its tokens, so a 'distinct' in a string or a quoted name stays). A query
    sqlglot cannot tokenize is returned unchanged (SQLite then judges it)."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("sqlite").tokenize(sql)
    except (sqlglot.errors.TokenError, ValueError):
        return sql
    spans = [(t.start, t.end + 1) for t in tokens if t.token_type == TokenType.DISTINCT]
    for start, end in reversed(spans):
        sql = sql[:start] + sql[end:]
    return sql


def _unordered_row(row: tuple) -> tuple:
    return tuple(sorted(row, key=lambda v: str(v) + str(type(v))))


def _column_permutations(gold_rows: list, pred_rows: list):
    """The column orders worth trying (test-suite-sql-eval's ``get_constraint_permutation``,
    with its 20 random rows replaced by the first 20 so a verdict never varies): all of them
    up to three columns; beyond that, only those whose every mapped predicted column holds
    values of its gold column."""
    width = len(gold_rows[0])
    if width <= 3:
        return itertools.permutations(range(width))
    gold_columns = [{row[i] for row in gold_rows} for i in range(width)]
    sample = pred_rows[:20]
    # allowed[j]: the predicted columns that may stand in gold column j
    allowed = [[i for i in range(width) if all(row[i] in gold_columns[j] for row in sample)]
               for j in range(width)]
    return itertools.product(*allowed)


def spider_result_eq(pred_rows: list, gold_rows: list, ordered: bool) -> bool:
    """Spider's execution match: same rows up to a permutation of the columns, as multisets, or
    as sequences when ``ordered`` (test-suite-sql-eval ``result_eq``)."""
    if not pred_rows and not gold_rows:
        return True
    if len(pred_rows) != len(gold_rows) or len(pred_rows[0]) != len(gold_rows[0]):
        return False
    quick_pred = [_unordered_row(r) for r in pred_rows]
    quick_gold = [_unordered_row(r) for r in gold_rows]
    if (quick_pred != quick_gold) if ordered else (set(quick_pred) != set(quick_gold)):
        return False
    gold_counts = collections.Counter(gold_rows)
    for perm in _column_permutations(gold_rows, pred_rows):
        if len(set(perm)) != len(perm):
            continue
        permuted = [tuple(row[i] for i in perm) for row in pred_rows]
        if permuted == gold_rows if ordered else collections.Counter(permuted) == gold_counts:
            return True
    return False


def results_match(pred_rows: list, gold_rows: list, comparison: str, ordered: bool) -> bool:
    """BIRD: the same set of rows, columns as they come (BIRD's ``set(pred) == set(gold)``);
    Spider: ``spider_result_eq``."""
    if comparison == "bird":
        return set(pred_rows) == set(gold_rows)
    return spider_result_eq(pred_rows, gold_rows, ordered)


class SQLEvaluator(Evaluator):
    name = "sqlite-exec"
    # 2: Spider comparison without DISTINCT (test-suite-sql-eval's default), no order hint
    version = f"2+sqlite{sqlite3.sqlite_version}"

    def __init__(self, timeout_s: float = 10.0, max_rows: int = 200_000, feedback_rows: int = 3,
                 max_value_bytes: int = 8 << 20, max_result_bytes: int = 64 << 20,
                 max_sql_bytes: int = 1 << 20, keep_distinct: bool = False):
        # keep_distinct: test-suite-sql-eval's flag of the same name (off by default there too)
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.max_value_bytes = max_value_bytes
        self.max_result_bytes = max_result_bytes
        self.max_sql_bytes = max_sql_bytes
        self.feedback_rows = feedback_rows
        self.keep_distinct = keep_distinct
        self._local = threading.local()
        self._gold_cache: dict[tuple[str, str], tuple[list, bool]] = {}
        self._digests: dict[str, tuple[tuple, str]] = {}   # db path -> (stat key, digest)

    def environment_digest(self, task: Task) -> str:
        """sha256 of the task's database file (``sha256:<hex>``): a row added, removed or
        changed is a new environment. Hashed once per file state (size, modification time
        and inode), so asking for every record of a store costs one ``stat`` each."""
        path = getattr(task.reference, "db_path", "")
        if not path:
            return ""
        st = os.stat(path)
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        cached = self._digests.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self._digests[path] = (key, f"sha256:{digest.hexdigest()}")
        return self._digests[path][1]

    def _connection(self, db_path: str) -> sqlite3.Connection:
        conns = self._local.__dict__.setdefault("conns", {})
        if db_path not in conns:
            conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
            conn.text_factory = lambda b: b.decode("utf-8", errors="replace")
            conn.set_authorizer(_authorizer)
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_value_bytes)
            conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, self.max_sql_bytes)
            for name in ("printf", "format"):
                conn.create_function(name, -1, _guarded_printf(self._local))
            conns[db_path] = conn
        return conns[db_path]

    def run_query(self, db_path: str, sql: str, timeout_s: float | None = None) -> list[tuple]:
        """Executes one read-only statement; raises QueryError or TimeoutError."""
        conn = self._connection(db_path)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        timed_out = []

        def progress():
            if time.monotonic() > deadline:
                timed_out.append(True)
                return 1
            return 0

        conn.set_progress_handler(progress, 1000)
        try:
            cursor = conn.execute(sql)
            rows, size = [], 0
            for row in cursor:
                rows.append(row)
                size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row)
                if len(rows) > self.max_rows:
                    raise QueryError(f"result has more than {self.max_rows} rows")
                if size > self.max_result_bytes:
                    raise QueryError(f"result is larger than {self.max_result_bytes >> 20} MB")
            return rows
        except sqlite3.Error as err:
            if timed_out:
                raise TimeoutError(f"query ran past {timeout_s or self.timeout_s:.1f}s") from None
            if "user-defined function raised exception" in str(err):  # only printf/format are ours
                raise QueryError(f"printf/format width or precision above {PRINTF_LIMIT}") from None
            raise QueryError(f"{type(err).__name__}: {err}") from None
        except (sqlite3.Warning, ValueError) as err:  # e.g. several statements at once
            raise QueryError(str(err)) from None
        finally:
            conn.set_progress_handler(None, 0)
            if conn.in_transaction:
                conn.rollback()

    def _compared(self, ref: SQLReference, sql: str) -> str:
        """The text of a query that the comparison runs: Spider's without DISTINCT."""
        if ref.comparison == "bird" or self.keep_distinct:
            return sql
        return without_distinct(sql)

    def gold_result(self, ref: SQLReference) -> tuple[list, bool]:
        """The reference's rows as compared (Spider: without DISTINCT) and whether its order
        counts (a top-level ORDER BY), cached per database and query."""
        key = (ref.db_path, ref.gold_sql)
        if key not in self._gold_cache:
            self._gold_cache[key] = (self.run_query(ref.db_path, self._compared(ref, ref.gold_sql)),
                                     gold_orders(ref.gold_sql))
        return self._gold_cache[key]

    def _check(self, task: Task, action: str) -> Outcome:
        ref: SQLReference = task.reference
        sql = action.strip()
        if not sql:
            return Outcome(0.0, False, True, "Empty query: write one SQL SELECT statement.")
        gold, ordered = self.gold_result(ref)
        # Never shown to the agent (feedback carries no trace of it): Module II reads it.
        empty = {"reference_empty": True} if not gold else {}
        try:
            rows = self.run_query(ref.db_path, sql)   # the candidate's own result, for feedback
        except QueryError as err:
            return Outcome(0.0, False, True, f"SQL error: {truncate(str(err), 500)}",
                           details={"error": str(err), **empty})
        compared = self._compared(ref, sql)
        try:
            compared_rows = rows if compared == sql else self.run_query(ref.db_path, compared)
            ok = results_match(compared_rows, gold, ref.comparison, ordered)
        except QueryError:
            ok = False   # the official evaluator scores a query it cannot run as wrong
        width = len(rows[0]) if rows else 0
        preview = "; ".join(repr(tuple(r)) for r in rows[: self.feedback_rows])
        if ok:
            feedback = (f"Correct: the result matches the expected result (your query returned "
                        f"{len(rows)} rows).")
        else:
            feedback = (f"Wrong result. Your query returned {len(rows)} rows × {width} columns"
                        + (f"; first rows: {truncate(preview, 400)}" if rows else "")
                        + ". It does not match the expected result.")
        return Outcome(1.0 if ok else 0.0, ok, True, feedback,
                       details={"rows": len(rows), "columns": width, **empty})
