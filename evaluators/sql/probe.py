"""What Module I's SQL edit operators may learn from a task's database, without its reference."""
import dataclasses
import functools
import sqlite3

from evaluators.sql.checker import QueryError, SQLEvaluator

PROBE_TIMEOUT_S = 2.0     # per candidate query
PROBE_MAX_ROWS = 20_000   # a candidate returning more is treated as failing


@dataclasses.dataclass(frozen=True)
class ForeignKey:
    """``table.column`` references ``ref_table.ref_column`` (all lower-cased)."""
    table: str
    column: str
    ref_table: str
    ref_column: str


@dataclasses.dataclass(frozen=True)
class DatabaseSchema:
    """Lower-cased table -> its columns as written, text columns apart, and the foreign keys."""
    columns: dict
    text_columns: dict
    foreign_keys: tuple

    def neighbours(self, table: str):
        """(other table, join condition as (table, column, other, other column)) along each key."""
        for fk in self.foreign_keys:
            if fk.table == table:
                yield fk.ref_table, (fk.table, fk.column, fk.ref_table, fk.ref_column)
            elif fk.ref_table == table:
                yield fk.table, (fk.ref_table, fk.ref_column, fk.table, fk.column)


@functools.lru_cache(maxsize=64)
def database_schema(db_path: str) -> DatabaseSchema:
    """The schema of the database file (read-only); raises ``sqlite3.Error`` if unreadable."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        columns, text, keys = {}, {}, []
        for t in tables:
            info = conn.execute(f'PRAGMA table_info("{t}")').fetchall()
            columns[t.lower()] = tuple(r[1] for r in info)
            text[t.lower()] = tuple(r[1] for r in info if "char" in (r[2] or "").lower()
                                    or "text" in (r[2] or "").lower() or not r[2])
            for fk in conn.execute(f'PRAGMA foreign_key_list("{t}")').fetchall():
                ref_table = fk[2].lower()
                ref_col = fk[4]
                if ref_col is None:  # a key naming only its table references the primary key
                    ref_info = conn.execute(f'PRAGMA table_info("{fk[2]}")').fetchall()
                    ref_col = next((r[1] for r in ref_info if r[5]), None)
                if ref_col is not None and ref_table in {x.lower() for x in tables}:
                    keys.append(ForeignKey(t.lower(), fk[3].lower(), ref_table, ref_col.lower()))
        return DatabaseSchema(columns, text, tuple(sorted(set(keys), key=dataclasses.astuple)))
    finally:
        conn.close()


_PROBE = SQLEvaluator(timeout_s=PROBE_TIMEOUT_S, max_rows=PROBE_MAX_ROWS)


def execute(db_path: str, sql: str) -> list[tuple] | None:
    """The rows of ``sql`` on the database (read-only, time-limited); None when it fails."""
    try:
        return _PROBE.run_query(db_path, sql)
    except (QueryError, TimeoutError):
        return None


def stored_values(db_path: str, table: str, column: str, literal: str, limit: int = 3):
    """Distinct values of ``table.column`` that equal ``literal`` up to case and surrounding
    spaces, or contain it: what the database stores for the value a question names."""
    q_table, q_col = table.replace('"', '""'), column.replace('"', '""')
    rows = execute(db_path, f'SELECT DISTINCT "{q_col}" FROM "{q_table}" '
                            f'WHERE lower(trim("{q_col}")) = lower(trim(\'{_quote(literal)}\')) '
                            f'OR "{q_col}" LIKE \'%{_quote(literal.strip())}%\' '
                            f'ORDER BY length("{q_col}"), "{q_col}" LIMIT {int(limit)}')
    return [r[0] for r in rows or () if isinstance(r[0], str)]


def holds_value(db_path: str, table: str, column: str, literal: str) -> bool:
    """Whether ``table.column`` stores ``literal`` (up to case and surrounding spaces)."""
    q_table, q_col = table.replace('"', '""'), column.replace('"', '""')
    rows = execute(db_path, f'SELECT 1 FROM "{q_table}" WHERE lower(trim("{q_col}")) = '
                            f'lower(trim(\'{_quote(literal)}\')) LIMIT 1')
    return bool(rows)


def _quote(text: str) -> str:
    return text.replace("'", "''")


@dataclasses.dataclass(frozen=True)
class Database:
    """A task's database as the operators see it: a path and the reads above, nothing else."""
    path: str

    @property
    def schema(self) -> DatabaseSchema:
        return database_schema(self.path)

    def execute(self, sql: str) -> list[tuple] | None:
        return execute(self.path, sql)

    def stored_values(self, table: str, column: str, literal: str, limit: int = 3) -> list[str]:
        return stored_values(self.path, table, column, literal, limit)

    def holds_value(self, table: str, column: str, literal: str) -> bool:
        return holds_value(self.path, table, column, literal)
