"""The names an SQL action uses, read from its parse tree: the SQL domain's ``ActionNames`` hook
for derived conditions (paper §3.3; ``method/conditions/derivation.py``).
"""
import dataclasses
import re

import sqlglot
from sqlglot import exp
from sqlglot.diff import Insert, Remove, Update, diff

from countermem_jax.domains.base import TEXT_NAMES
from countermem_jax.method.conditions import EditNames

# The kind of an SQL error in a checker's feedback, its names left out ("no such column",
# "ambiguous column name", "no such table"): "SQL error: OperationalError: no such column: x"
_SQL_ERROR = re.compile(r"SQL error: \w+: ([a-z][a-z ]*[a-z])(?::|$)")

# sqlglot's recursive parser fails past about 45 nested levels (SQLite accepts about 99) and
# its tree diff grows faster than the tree (about 1 s at 250 nodes, 10 s at 2,000): deeper,
# longer or larger statements are not parsed here, and their conditions are derived from the
# text. Spider's queries reach 361 characters and 88 nodes.
MAX_SQL_DEPTH = 32
MAX_SQL_CHARS = 4_000
MAX_SQL_NODES = 160


def nesting_depth(text: str) -> int:
    """The deepest parenthesis nesting of ``text`` (one linear scan; quotes not excluded)."""
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth = max(0, depth - 1)
    return deepest


def _read(sql: str) -> tuple[exp.Expression | None, str]:
    """(the SQLite statement ``sql`` as a tree, or None; why the bounds refused it, or "").

    None with no reason when it does not parse; None with the reason when it is longer than
    ``MAX_SQL_CHARS``, nested deeper than ``MAX_SQL_DEPTH`` or larger than ``MAX_SQL_NODES``."""
    if len(sql) > MAX_SQL_CHARS:
        return None, f"longer than {MAX_SQL_CHARS} characters"
    if nesting_depth(sql) > MAX_SQL_DEPTH:
        return None, f"nested deeper than {MAX_SQL_DEPTH}"
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError, RecursionError):
        return None, ""
    nodes = 0
    for _ in tree.walk():   # iterative (breadth first): no recursion on a deep tree
        nodes += 1
        if nodes > MAX_SQL_NODES:
            return None, f"more than {MAX_SQL_NODES} parse nodes"
    return tree, ""


def sql_refusal(sql: str) -> str:
    """Why ``sql`` is not read as a tree although it may be valid SQL (too long, too deep, too
    large: the bounds above), or "" when the bounds do not refuse it (a statement that does not
    parse is no refusal). A derived condition then reads the edit as text."""
    return _read(sql)[1]


def _sql_tables(tree: exp.Expression) -> dict[str, str]:
    """alias (or name) -> table name, lower-cased, for every table the query reads."""
    out = {}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        out[name] = name
        if table.alias:
            out[table.alias.lower()] = name
    return out


def _sql_names(node: exp.Expression, tables: dict[str, str], out: dict[str, set]) -> None:
    """Adds to ``out`` the tables, columns and non-empty string literals found under ``node``.

    Column qualifiers are resolved through ``tables`` (alias → table), so ``T1.name`` counts
    as touching the table ``T1`` stands for.
    """
    for n in node.walk():
        if isinstance(n, exp.Table):
            out["tables"].add(n.name.lower())
        elif isinstance(n, exp.Column) and n.name and n.name != "*":
            out["names"].add(n.name.lower())
            if n.table:
                out["tables"].add(tables.get(n.table.lower(), n.table.lower()))
        elif isinstance(n, exp.Literal) and n.is_string and n.this.strip():
            out["names"].add(n.this.strip().lower())


def _same_column(a: exp.Expression, ta: dict, b: exp.Expression, tb: dict) -> bool:
    """Only the qualifier changed (``T1.country`` -> ``country``), on the same table. An
    unqualified column belongs to its query's table when the query reads one table, so a column
    moved to a joined table (``birth_date`` -> ``people.birth_date``) is a change."""
    if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)) or a.name != b.name:
        return False

    def table(col, tables):
        if col.table:
            return tables.get(col.table.lower())
        only = set(tables.values())
        return only.pop() if len(only) == 1 else None
    ta_name, tb_name = table(a, ta), table(b, tb)
    return ta_name == tb_name or None in (ta_name, tb_name)


def _join_key(node: exp.Expression) -> bool:
    """Whether ``node`` lies in a join's ON clause: a key the schema implies, not a name a
    request would state."""
    join = node if isinstance(node, exp.Join) else node.find_ancestor(exp.Join)
    on = join.args.get("on") if join is not None else None
    return on is not None and (node is on or any(node is n for n in on.walk()))


def _touch(node: exp.Expression, tables: dict, out: dict, names: bool = True) -> None:
    """Adds what a removed, inserted or updated ``node`` touched: a join its tables only (its
    keys follow from the schema), a node inside a join's ON nothing, else its names and tables
    (``names=False``: its tables only)."""
    if _join_key(node) and not isinstance(node, exp.Join):
        return
    found: dict[str, set] = {"names": set(), "tables": set()}
    _sql_names(node, tables, found)
    out["tables"] |= found["tables"]   # a join's: the table joined in and those its keys name
    if names and not isinstance(node, exp.Join):
        out["names"] |= found["names"]


def sql_touched(original: str, improved: str) -> dict[str, set] | None:
    """{"names": columns and string literals, "tables": tables} in the removed / inserted /
    updated parts of a SQL edit; None when either side does not parse.

    A whole statement removed and inserted again (how ``sqlglot.diff`` reports a change at the
    root) is passed over in favour of the finer edits it reports with it. Names are taken from
    the improved side only (the column or value a fix introduces is what a later request asks
    for; the mistaken one need not be stated), tables from both."""
    return _touched_trees(_read(original)[0], _read(improved)[0])


def _touched_trees(a, b) -> dict[str, set] | None:
    """``sql_touched`` of two parsed statements (None when either is None, or when sqlglot
    built a tree it cannot walk: no parenthesis deepens it, so the bounds do not catch it)."""
    try:
        return _sql_touched(a, b)
    except RecursionError:
        return None


def _sql_touched(a, b) -> dict[str, set] | None:
    """``sql_touched`` of two parsed statements (None when either is None)."""
    if a is None or b is None:
        return None
    ta, tb = _sql_tables(a), _sql_tables(b)
    edits = [e for e in diff(a, b) if isinstance(e, (Remove, Insert, Update))]
    touched: dict[str, set] = {"names": set(), "tables": set()}
    for whole in (False, True):   # the root's own edits only when nothing finer was reported
        for edit in edits:
            if isinstance(edit, (Remove, Insert)):
                if (edit.expression.parent is None) != whole:
                    continue
                removed = isinstance(edit, Remove)
                _touch(edit.expression, ta if removed else tb, touched, names=not removed)
            elif not whole and not _same_column(edit.source, ta, edit.target, tb):
                _touch(edit.source, ta, touched, names=False)
                _touch(edit.target, tb, touched)
        if touched["names"] or touched["tables"]:
            break
    return touched


def error_kind(feedback: str) -> str:
    """The kind of SQL error the checker's ``feedback`` reports ("no such column"), "" if none."""
    m = _SQL_ERROR.search(feedback or "")
    return m.group(1) if m else ""


class SqlNames:
    """The SQL domain's ``ActionNames``: tables, columns and string literals of parse trees."""

    def edit_names(self, original: str, improved: str, feedback: str = "") -> EditNames:
        """Columns and literals the fix introduced (``every``), tables on both sides (``some``)
        and the original's kind of error; the text reading (``TEXT_NAMES``) when a side does not
        parse or the bounds refuse it, ``refused`` saying why in the latter case."""
        (a, why_a), (b, why_b) = _read(original), _read(improved)
        touched = _touched_trees(a, b)
        if touched is None:
            return dataclasses.replace(TEXT_NAMES.edit_names(original, improved),
                                       refused=why_a or why_b)
        return EditNames(frozenset(touched["names"]), frozenset(touched["tables"]),
                         error_kind(feedback), refused=why_a or why_b)

    def action_names(self, action: str) -> frozenset[str] | None:
        """Every table, column and string literal ``action`` uses, lower-cased (aliases
        resolved); None when it does not parse or the bounds refuse it."""
        tree = _read(action)[0]
        if tree is None:
            return None
        found: dict[str, set] = {"names": set(), "tables": set()}
        try:
            _sql_names(tree, _sql_tables(tree), found)
        except RecursionError:
            return None
        return frozenset(found["names"] | found["tables"])

    def parses(self, action: str) -> bool | None:
        """Whether ``action`` is one SQLite statement ``sqlglot`` parses; None when the parse
        bounds refuse it (too long or too deep to tell)."""
        if len(action) > MAX_SQL_CHARS or nesting_depth(action) > MAX_SQL_DEPTH:
            return None
        try:
            sqlglot.parse_one(action, read="sqlite")
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
            return False
        except RecursionError:
            return None
        return True


SQL_NAMES = SqlNames()
