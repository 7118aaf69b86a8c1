"""Loaders for the official Spider and BIRD layouts."""
import functools
import json
import logging
import pathlib
import sqlite3

import sqlglot

from evaluators.base import InputError, Task
from evaluators.sql.checker import SQLReference
from evaluators.sql.features import question_features

log = logging.getLogger(__name__)


class DataError(InputError, ValueError):
    """A benchmark file is missing or malformed; the message names it."""


@functools.lru_cache(maxsize=256)
def render_schema(db_path: str) -> str:
    """CREATE statements of the database's tables, as SQLite stores them."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE type='table' AND sql IS NOT NULL "
                            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return "\n".join(" ".join(r[0].split()) + ";" for r in rows)


@functools.lru_cache(maxsize=64)
def schema_columns(db_path: str) -> dict[str, tuple[str, ...]]:
    """Lower-cased table name -> its lower-cased column names, read from the database file
    (read-only); raises ``sqlite3.Error`` when the file cannot be read. What the SQL rule edits
    of Module I need to know about a task's database (join keys, schema linking)."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        return {t.lower(): tuple(r[1].lower() for r in conn.execute(f'PRAGMA table_info("{t}")'))
                for t in tables}
    finally:
        conn.close()


def _read_json(path: pathlib.Path):
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg}, line {err.lineno})") from None


def _field(path, i, entry, key):
    if not isinstance(entry, dict) or key not in entry:
        raise DataError(f"{path}: entry {i}: missing field {key!r}")
    return entry[key]


def _check_db_ids(path, entries, db_ids) -> None:
    """Refuses databases the config asks for that no question of the file uses (a typo would
    otherwise load fewer tasks, or none, without naming it)."""
    if not db_ids:
        return
    known = {e.get("db_id") for e in entries if isinstance(e, dict)}
    unknown = sorted(set(db_ids) - known)
    if unknown:
        raise DataError(f"data.db_ids: no question of {path} uses the database(s) "
                        f"{', '.join(unknown)}")


def _sql_task(benchmark, task_id, db_id, db_path, question, gold, comparison, evidence=""):
    context = f"Database: {db_id}\nSchema:\n{render_schema(str(db_path))}"
    if evidence:
        context += f"\nEvidence: {evidence}"
    return Task(task_id=task_id, domain="sql", benchmark=benchmark, prompt=question,
                context=context, decision_unit="join / predicate" if benchmark == "spider"
                else "schema / join",
                reference=SQLReference(gold, str(db_path), comparison),
                features={"db_id": db_id, **question_features(question)}, environment=db_id)


def load_spider(root: str | pathlib.Path, split: str = "dev", db_ids=None) -> list[Task]:
    root = pathlib.Path(root)
    path = root / ("dev.json" if split == "dev" else "train_spider.json" if split == "train"
                   else f"{split}.json")
    entries = _read_json(path)
    if not isinstance(entries, list):
        raise DataError(f"{path}: expected a list of examples")
    _check_db_ids(path, entries, db_ids)
    tasks, missing = [], set()
    for i, entry in enumerate(entries):
        db_id = _field(path, i, entry, "db_id")
        if db_ids is not None and db_id not in db_ids:
            continue
        db_path = root / "database" / db_id / f"{db_id}.sqlite"
        if not db_path.exists():
            missing.add(db_id)
            continue
        index = entry.get("dev_index", i)
        tasks.append(_sql_task("spider", f"spider/{db_id}/{index}", db_id, db_path,
                               _field(path, i, entry, "question"), _field(path, i, entry, "query"),
                               "spider"))
    if missing:
        log.warning("spider %s: skipped questions of %d databases without a .sqlite file: %s",
                    split, len(missing), sorted(missing))
    if not tasks:
        raise DataError(f"{path}: no usable questions (databases expected under {root / 'database'})")
    log.info("spider %s: loaded %d questions over %d databases", split, len(tasks),
             len({t.environment for t in tasks}))
    return tasks


def load_bird(json_path: str | pathlib.Path, db_root: str | pathlib.Path, db_ids=None) -> list[Task]:
    json_path, db_root = pathlib.Path(json_path), pathlib.Path(db_root)
    entries = _read_json(json_path)
    if not isinstance(entries, list):
        raise DataError(f"{json_path}: expected a list of examples")
    _check_db_ids(json_path, entries, db_ids)
    tasks = []
    for i, entry in enumerate(entries):
        db_id = _field(json_path, i, entry, "db_id")
        if db_ids is not None and db_id not in db_ids:
            continue
        db_path = db_root / db_id / f"{db_id}.sqlite"
        if not db_path.exists():
            raise DataError(f"BIRD database {db_path} not found: download the BIRD dev databases and "
                            f"pass their folder (dev_databases) as db_root")
        qid = entry.get("question_id", i)
        gold = entry.get("SQL", entry.get("query"))
        if gold is None:
            raise DataError(f"{json_path}: entry {i}: missing field 'SQL'")
        tasks.append(_sql_task("bird", f"bird/{db_id}/{qid}", db_id, db_path,
                               _field(json_path, i, entry, "question"), gold, "bird",
                               entry.get("evidence", "")))
    log.info("bird: loaded %d questions over %d databases", len(tasks),
             len({t.environment for t in tasks}))
    return tasks


def build_schema_only_db(ddl_path: str | pathlib.Path, out_path: str | pathlib.Path) -> pathlib.Path:
    """An *empty* SQLite database from a DDL file (BIRD ships DDL here but no databases).

    Only for exercising the loader and checker wiring: every query on it returns no rows.
    """
    out_path = pathlib.Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(out_path)
    try:
        conn.executescript(pathlib.Path(ddl_path).read_text(encoding="utf-8"))
        conn.commit()
    finally:
        conn.close()
    return out_path


@functools.lru_cache(maxsize=65536)
def normalized_query(sql: str) -> str:
    """The query as sqlglot prints it (keywords, identifiers, spacing, quoting normalized),
    lower-cased; whitespace-normalized text when sqlglot cannot parse it. Cached: the splits and
    every transfer check group the same references again (2 ms of sqlglot a time)."""
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
        return tree.sql(dialect="sqlite", normalize=True).lower()
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return " ".join(sql.lower().split())


def group_key(task: Task) -> str:
    """Same database and same normalized gold query: one group (Spider's paraphrase twins)."""
    return f"{task.environment}:{normalized_query(task.reference.gold_sql)}"
