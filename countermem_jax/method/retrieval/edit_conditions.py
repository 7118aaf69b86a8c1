"""Checkable conditions derived from a verified edit, for records that have none of their own.

A record whose distillation failed (or whose free-text condition a weak backbone cannot judge) has
no applicability condition of its own. Scoping it to its source environment
(``environment == <db>``) offers it on every question about that database, which is how such
records broke tasks they had nothing to do with. Instead, the condition is derived
from what the checked edit itself changed:

  SQL      the tables, columns and string literals inside the parts of the query that
           ``sqlglot.diff`` reports as removed, inserted or updated (table aliases resolved);
  others   the identifiers on the lines the edit changed (language keywords dropped).

The derived clause ``edit touches [a, b, ...]`` holds when the new request names or implies every
listed identifier, ``edit touches any [...]`` when it names at least one (``mentions``:
snake/camel-case parts, plural and prefix forms). For SQL every touched column and literal must be
named and one touched table (tables are often implied: "poker players" for ``people`` joined
through ``poker_player``). An edit that touches nothing nameable yields ``edit touches any []``,
which never holds. Two clauses say what the correction needs of the draft it would revise:
``draft has [...]`` (the draft still uses every name only the original action used: it repeats
the mistake) and ``draft lacks [...]`` (it does not use all the names only the improved action
uses: the fix is not already there). A repair of an SQL error asks instead of the names that the
last attempt failed with the same kind of error (``feedback contains "no such column"``). Whether
such records are
offered under their derived condition or kept out of retrieval altogether is the retrieval-time
choice ``memory.fallback_condition`` ("derive" or "exclude"), applied by ``RuleChecker``.
"""
import re

import sqlglot
from sqlglot import exp
from sqlglot.diff import Insert, Remove, Update, diff

from countermem_jax.method import bounded_diff

# Clause keyword shared with ``conditions.RuleChecker``, which evaluates these conditions.
EDIT_CLAUSE = "edit touches"
DRAFT_HAS, DRAFT_LACKS = "draft has", "draft lacks"
FEEDBACK_CLAUSE = "feedback contains"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[a-z0-9]+")
# The kind of an SQL error in a checker's feedback, its names left out ("no such column",
# "ambiguous column name", "no such table"): "SQL error: OperationalError: no such column: x"
_SQL_ERROR = re.compile(r"SQL error: \w+: ([a-z][a-z ]*[a-z])(?::|$)")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Words that say nothing about which data an edit touched: language and SQL keywords,
# plus option names of the solver domains.
_KEYWORDS = frozenset("""
    and or not if else elif for while return def class in is none true false null let var fn mut
    pub use import from as with lambda pass break continue try except finally raise yield assert
    int bool str float nat real requires ensures invariant decreases assert method function
    lemma theorem by have show exact intro apply simp solver assumptions phases conflict_budget
    select where group order limit distinct join on having count sum avg min max asc desc
""".split())


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


# sqlglot's recursive parser fails past about 45 nested levels (SQLite accepts about 99) and
# its tree diff grows faster than the tree (about 1 s at 250 nodes, 10 s at 2,000): deeper,
# longer or larger statements are not parsed here, and their conditions are derived from the
# text (issue 39). Spider's queries reach 361 characters and 88 nodes.
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


def sql_refusal(sql: str) -> str:
    """Why ``_parse`` would not read ``sql`` as a tree although it may be valid SQL (too long,
    too deep, too large: issue 39's bounds), or "" when the bounds do not refuse it. A derived
    condition then reads the edit as text; construction logs the reason."""
    if len(sql) > MAX_SQL_CHARS:
        return f"longer than {MAX_SQL_CHARS} characters"
    if nesting_depth(sql) > MAX_SQL_DEPTH:
        return f"nested deeper than {MAX_SQL_DEPTH}"
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError, RecursionError):
        return ""
    if sum(1 for _ in zip(tree.walk(), range(MAX_SQL_NODES + 1))) > MAX_SQL_NODES:
        return f"more than {MAX_SQL_NODES} parse nodes"
    return ""


def _parse(sql: str) -> exp.Expression | None:
    """The SQLite statement ``sql`` as a tree, None when it does not parse or is longer than
    ``MAX_SQL_CHARS``, nested deeper than ``MAX_SQL_DEPTH`` or larger than ``MAX_SQL_NODES``."""
    if len(sql) > MAX_SQL_CHARS or nesting_depth(sql) > MAX_SQL_DEPTH:
        return None
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError, RecursionError):
        return None
    nodes = 0
    for _ in tree.walk():   # iterative (breadth first): no recursion on a deep tree
        nodes += 1
        if nodes > MAX_SQL_NODES:
            return None
    return tree


def sql_touched(original: str, improved: str) -> dict[str, set] | None:
    """{"names": columns and string literals, "tables": tables} in the removed / inserted /
    updated parts of a SQL edit; None when either side does not parse.

    A whole statement removed and inserted again (how ``sqlglot.diff`` reports a change at the
    root) is passed over in favour of the finer edits it reports with it. Names are taken from
    the improved side only (the column or value a fix introduces is what a later request asks
    for; the mistaken one need not be stated), tables from both."""
    try:
        return _sql_touched(_parse(original), _parse(improved))
    except RecursionError:   # a tree sqlglot built but cannot walk (no parenthesis deepens it)
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


def text_touched(original: str, improved: str) -> set[str]:
    """Identifiers (keywords dropped) on the lines a textual edit changed."""
    a, b = original.splitlines(), improved.splitlines()
    changed = []
    for op, i1, i2, j1, j2 in bounded_diff.opcodes(a, b).opcodes:   # bounded cost (issue 39)
        if op != "equal":
            changed += a[i1:i2] + b[j1:j2]
    return {w.lower() for line in changed for w in _IDENT.findall(line)
            if len(w) > 1 and w.lower() not in _KEYWORDS}


def _listed(names) -> str:
    """Sorted, comma-joined identifiers for a clause; names that would break the grammar are dropped.

    A literal containing a comma, a bracket or a spaced ``and`` would split the clause when the
    condition is parsed back, so it is left out rather than escaped.
    """
    return ", ".join(sorted(n for n in names if n and not re.search(r",|\]|\[|\s(and|&&)\s", n)))


def action_names(domain: str, action: str) -> set[str] | None:
    """Every name an action uses, lower-cased: for SQL its tables, columns and string literals
    (aliases resolved; None when it does not parse), otherwise its identifiers less keywords."""
    if domain != "sql":   # each distinct identifier once: a long action repeats most
        return {w.lower() for w in set(_IDENT.findall(action))
                if len(w) > 1 and w.lower() not in _KEYWORDS}
    tree = _parse(action)
    if tree is None:
        return None
    found: dict[str, set] = {"names": set(), "tables": set()}
    try:
        _sql_names(tree, _sql_tables(tree), found)
    except RecursionError:
        return None
    return found["names"] | found["tables"]


def draft_uses(names, draft: str, any_: bool = False) -> bool:
    """Whether ``draft`` uses every one of ``names`` (``any_``: one of them): each as a whole
    identifier (any case), or, for a name that is not an identifier (a string literal), as text."""
    idents, text = {w.lower() for w in _IDENT.findall(draft)}, draft.lower()
    return (any if any_ else all)(n.lower() in (idents if _IDENT.fullmatch(n) else text)
                                  for n in names)


def error_kind(feedback: str) -> str:
    """The kind of SQL error the checker's ``feedback`` reports ("no such column"), "" if none."""
    m = _SQL_ERROR.search(feedback or "")
    return m.group(1) if m else ""


def derived_condition(domain: str, original: str, improved: str, environment: str,
                      original_feedback: str = "") -> str:
    """The condition a record without its own gets from its verified edit.

    SQL: ``edit touches [columns and literals]`` (all named or implied) ``AND edit touches any
    [tables]`` (one of them named or implied); other domains: ``edit touches any [identifiers]``.
    Prefixed by ``environment == <env>`` when the task has one. An edit with nothing nameable
    gets ``edit touches any []``, which never holds.

    Then what the correction needs of the draft it would revise (the state s of Eq. 7): ``draft
    has [names only the original used]`` (the draft repeats the mistake) and ``draft lacks
    [names only the improved action uses]`` (the draft does not already hold the fix, as when it
    already includes the requested boundary value, §3.4). Either is left out when its list would
    be empty.

    An SQL repair of an error (``original_feedback`` reports one) is offered after an attempt
    that failed with the same kind of error, ``feedback contains "no such column"``, in place
    of the names clause: the lesson (``Name`` of a poker player lives in ``people``) holds for
    the table's other columns too, and the error says the draft has that kind of mistake. Its
    tables are read from the draft, ``draft has any [tables]``, not from the question: the
    repair goes into a draft that reads one of them, whatever the question calls them ("How
    many cars have more than 4 cylinders?" names neither ``car_names`` nor ``cars_data``).
    """
    touched = sql_touched(original, improved) if domain == "sql" else None
    clauses = [f"environment == {environment}"] if environment else []
    kind = error_kind(original_feedback) if touched is not None else ""
    if kind:
        clauses.append(f'{FEEDBACK_CLAUSE} "{kind}"')
    if touched is not None:
        if touched["names"] and not kind:
            clauses.append(f"{EDIT_CLAUSE} [{_listed(touched['names'])}]")
        if touched["tables"] and kind:
            # where the repair goes: a draft that reads one of the tables the fix touched
            clauses.append(f"{DRAFT_HAS} any [{_listed(touched['tables'])}]")
        elif touched["tables"] or not touched["names"]:
            clauses.append(f"{EDIT_CLAUSE} any [{_listed(touched['tables'])}]")
    else:
        clauses.append(f"{EDIT_CLAUSE} any [{_listed(text_touched(original, improved))}]")
    before, after = action_names(domain, original), action_names(domain, improved)
    if before is not None and after is not None:
        for clause, names in ((DRAFT_HAS, before - after), (DRAFT_LACKS, after - before)):
            if _listed(names):
                clauses.append(f"{clause} [{_listed(names)}]")
    return " AND ".join(clauses)


def _stem(word: str) -> str:
    """Crude plural stripping (-ies, -es after s/x/z, -s) so "players" matches ``player``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _word_matches(part: str, words: set[str]) -> bool:
    """``part`` equals a word of the request, or one is a prefix of the other (≥ 4 letters).

    The prefix rule lets ``release`` match "released" without a real stemmer; the 4-letter floor
    keeps short parts from matching everything.
    """
    if part in words:
        return True
    for w in words:
        short, long_ = sorted((part, w), key=len)
        if len(short) >= 4 and long_.startswith(short):
            return True
    return False


def mentions(identifier: str, text: str) -> bool:
    """Does the text name or imply the identifier? Every part of it of three or more letters
    (split at ``_``, spaces and camelCase) must appear as a word, up to plural / prefix forms
    ("song_release_year" ~ "songs released in which year"); an identifier with no such part
    (``id``) is implied by any request."""
    words = {_stem(w) for w in _WORD.findall(text.lower())}
    parts = [_stem(p) for p in _WORD.findall(_CAMEL.sub(" ", identifier).lower()) if len(p) >= 3]
    return all(_word_matches(p, words) for p in parts)
