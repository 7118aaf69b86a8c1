"""Rule-based local edit operators of Module I, per domain (paper §3.2, Appendix B.4).

They fill the candidate slots the LLM's own edits leave free, up to K = 4. Each operator changes
exactly one decision unit of the failed action and never writes a replacement submission.
  SQL (sqlglot ASTs): comparison boundaries, DISTINCT, aggregates, join keys, ORDER BY direction,
                      LIMIT, GROUP BY, and schema linking: dropping an unused join, and swapping
                      a table or an answer column for one the question names.
  SAT strategy: solver, assumptions, phases, conflict budget. SAT encoding: drop or flip a clause.
  SMT solver action: solver, tactics, options. SMT encoding: comparison boundaries in assertions.
"""
import functools
import itertools
import re
import sqlite3
import time

import sqlglot
from sqlglot import exp

_FLIP = {exp.GT: exp.GTE, exp.GTE: exp.GT, exp.LT: exp.LTE, exp.LTE: exp.LT}
_AGG_SWAP = {exp.Max: exp.Min, exp.Min: exp.Max, exp.Sum: exp.Avg, exp.Avg: exp.Sum}


def _dedupe(original: str, candidates) -> list[str]:
    seen, out = {" ".join(original.split())}, []
    for c in candidates:
        key = " ".join(c.split())
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


@functools.lru_cache(maxsize=64)
def _schema_columns(db_path: str) -> dict[str, tuple[str, ...]]:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        return {t.lower(): tuple(r[1].lower() for r in conn.execute(f'PRAGMA table_info("{t}")'))
                for t in tables}
    finally:
        conn.close()


def _variants(tree: exp.Expression, db_path: str | None):
    """Yields edited copies of the tree, one change each."""
    for i, node in enumerate(tree.find_all(*_FLIP)):
        copy = tree.copy()
        target = list(copy.find_all(*_FLIP))[i]
        target.replace(_FLIP[type(target)](this=target.this, expression=target.expression))
        yield copy
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is not None:
        copy = tree.copy()
        sel = copy if isinstance(copy, exp.Select) else copy.find(exp.Select)
        sel.set("distinct", None if sel.args.get("distinct") else exp.Distinct())
        yield copy
    for i, count in enumerate(tree.find_all(exp.Count)):
        copy = tree.copy()
        target = list(copy.find_all(exp.Count))[i]
        arg = target.this
        if isinstance(arg, exp.Distinct):
            target.set("this", arg.expressions[0] if arg.expressions else exp.Star())
        elif not isinstance(arg, exp.Star):
            target.set("this", exp.Distinct(expressions=[arg]))
        else:
            continue
        yield copy
    for i, order in enumerate(tree.find_all(exp.Ordered)):
        copy = tree.copy()
        target = list(copy.find_all(exp.Ordered))[i]
        target.set("desc", not target.args.get("desc"))
        yield copy
    if tree.args.get("limit") is not None:
        copy = tree.copy()
        copy.set("limit", None)
        yield copy
    elif tree.args.get("order") is not None and isinstance(tree, exp.Select):
        yield tree.copy().limit(1)
    for i, agg in enumerate(tree.find_all(*_AGG_SWAP)):
        copy = tree.copy()
        target = list(copy.find_all(*_AGG_SWAP))[i]
        target.replace(_AGG_SWAP[type(target)](this=target.this))
        yield copy
    if isinstance(tree, exp.Select):
        if tree.args.get("group") is not None:
            copy = tree.copy()
            copy.set("group", None)
            yield copy
        else:
            plain = [e for e in tree.expressions if not e.find(exp.AggFunc) and
                     isinstance(e.unalias(), exp.Column)]
            if plain and len(plain) < len(tree.expressions):
                yield tree.copy().group_by(plain[0].unalias().copy())
    if db_path:
        yield from _join_key_variants(tree, db_path)


def _join_key_variants(tree: exp.Expression, db_path: str):
    try:
        schema = _schema_columns(db_path)
    except sqlite3.Error:
        return
    aliases = {}
    for table in tree.find_all(exp.Table):
        aliases[(table.alias or table.name).lower()] = table.name.lower()
    for i, join in enumerate(tree.find_all(exp.Join)):
        on = join.args.get("on")
        if not isinstance(on, exp.EQ):
            continue
        left, right = on.this, on.expression
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
            continue
        lt, rt = aliases.get(left.table.lower()), aliases.get(right.table.lower())
        if lt not in schema or rt not in schema:
            continue
        shared = [c for c in schema[lt] if c in schema[rt]]
        for col in shared[:2]:
            if (left.name.lower(), right.name.lower()) == (col, col):
                continue
            copy = tree.copy()
            target = list(copy.find_all(exp.Join))[i]
            target.set("on", exp.EQ(this=exp.column(col, table=left.table),
                                    expression=exp.column(col, table=right.table)))
            yield copy


def _stem(word: str) -> str:
    """Plural to singular, roughly: countries -> country, names -> name."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _words(text: str) -> set[str]:
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower().replace("_", " ")
    return {_stem(w) for w in re.findall(r"[a-z]+", text) if len(w) > 2}


def _match(column: str, wanted: set[str]) -> float:
    """Fraction of the column name's words that the question mentions."""
    words = _words(column)
    return len(words & wanted) / len(words) if words else 0.0


def _column_swap_variants(tree: exp.Expression, db_path: str, question: str, limit: int = 2):
    """Schema-linking edits: one column reference replaced by another column of the same table
    whose name shares the most words with the question (the commonest small-model mistake)."""
    try:
        schema = _schema_columns(db_path)
    except sqlite3.Error:
        return
    tables = {(t.alias or t.name).lower(): t.name.lower() for t in tree.find_all(exp.Table)}
    only = next(iter(tables.values())) if len(set(tables.values())) == 1 else None
    wanted = _words(question)
    projected = {id(c) for e in (tree.expressions if isinstance(tree, exp.Select) else [])
                 for c in e.find_all(exp.Column)}
    scored = []
    for i, col in enumerate(tree.find_all(exp.Column)):
        if id(col) not in projected:  # the answer columns: where a wrong column shows first
            continue
        table = tables.get(col.table.lower()) if col.table else only
        if table not in schema or col.name.lower() not in schema[table]:
            continue
        for other in schema[table]:
            if other == col.name.lower():
                continue
            # Prefer a column the question names more fully, and one related to the mistaken one
            # (Song_Name -> Name rather than Song_Name -> Country).
            gain = _match(other, wanted) - _match(col.name, wanted)
            related = bool(_words(other) & _words(col.name))
            if gain > 0:
                scored.append((-(gain + 0.5 * related), i, other))
    for _, i, other in sorted(scored)[:limit]:
        copy = tree.copy()
        target = list(copy.find_all(exp.Column))[i]
        target.set("this", exp.to_identifier(other))
        yield copy


def _drop_join_variants(tree: exp.Expression):
    """Removes a JOIN whose table is used nowhere but in its own ON clause (a join too many)."""
    for i, join in enumerate(tree.find_all(exp.Join)):
        table = join.this if isinstance(join.this, exp.Table) else None
        if table is None:
            continue
        name = (table.alias or table.name).lower()
        used = [c for c in tree.find_all(exp.Column) if c.table.lower() == name
                and c.find_ancestor(exp.Join) is not join]
        if not used:
            copy = tree.copy()
            list(copy.find_all(exp.Join))[i].pop()
            yield copy


def _table_swap_variants(tree: exp.Expression, db_path: str, question: str):
    """Single-table query on the wrong table: the same query on a table that has every column it
    uses and that the question names (schema linking at the table level)."""
    tables = list(tree.find_all(exp.Table))
    if len(tables) != 1:
        return
    try:
        schema = _schema_columns(db_path)
    except sqlite3.Error:
        return
    current = tables[0].name.lower()
    columns = {c.name.lower() for c in tree.find_all(exp.Column)}
    wanted = _words(question)
    for other, cols in schema.items():
        if other == current or not columns <= set(cols):
            continue
        if _match(other, wanted) > _match(current, wanted):
            copy = tree.copy()
            target = next(copy.find_all(exp.Table))
            target.set("this", exp.to_identifier(other))
            yield copy


SQL_PARSE_LIMIT = 20_000  # characters; longer queries (e.g. huge IN-lists) get the regex edits
SQL_EDIT_SECONDS = 2.0    # time bound on generating the AST edits of one query


def sql_edits(sql: str, db_path: str | None = None, limit: int = 8,
              question: str = "") -> list[str]:
    """Up to ``limit`` one-change edits of ``sql``. Never raises on a query SQLite accepts:
    queries sqlglot cannot parse, nests too deeply for (RecursionError), or that are longer than
    SQL_PARSE_LIMIT get the boundary edits found by a regular expression instead, and AST edits
    stop after SQL_EDIT_SECONDS (issue #11)."""
    if len(sql) <= SQL_PARSE_LIMIT:
        try:
            return _ast_edits(sql, db_path, limit, question, time.monotonic() + SQL_EDIT_SECONDS)
        except (RecursionError, sqlglot.errors.ParseError, sqlglot.errors.TokenError):
            pass
    return _dedupe(sql, _regex_boundary_edits(sql))[:limit]


def _ast_edits(sql, db_path, limit, question, deadline) -> list[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    out = []
    schema_edits = (itertools.chain(_table_swap_variants(tree, db_path, question),
                                    _column_swap_variants(tree, db_path, question))
                    if db_path and question else ())
    for variant in itertools.chain(_drop_join_variants(tree), schema_edits,
                                   _variants(tree, db_path)):
        try:
            out.append(variant.sql(dialect="sqlite"))
        except Exception:  # an edit sqlglot cannot print is skipped
            continue
        if len(out) >= 3 * limit or time.monotonic() > deadline:
            break
    if "nulls" not in sql.lower():  # sqlglot spells out SQLite's default NULL ordering on a flip
        out = [re.sub(r"\s+NULLS (FIRST|LAST)", "", o) for o in out]
    return _dedupe(tree.sql(dialect="sqlite"), _dedupe(sql, out))[:limit]


def _regex_boundary_edits(text: str) -> list[str]:
    out = []
    for m in re.finditer(r"(>=|<=|>|<)", text):
        op = {">=": ">", "<=": "<", ">": ">=", "<": "<="}[m.group(1)]
        out.append(text[: m.start()] + op + text[m.end():])
    return out


def sat_strategy_edits(action: str) -> list[str]:
    lines = [l for l in action.splitlines() if l.strip()]
    keys = {l.split(":", 1)[0].strip().lower(): i for i, l in enumerate(lines) if ":" in l}
    out = []
    if "solver" in keys:
        current = lines[keys["solver"]].split(":", 1)[1].strip().lower()
        for alt in ("cadical195", "glucose4", "maplechrono", "minisat22"):
            if alt != current:
                out.append("\n".join(lines[:keys["solver"]] + [f"solver: {alt}"]
                                     + lines[keys["solver"] + 1:]))
    for key in ("assumptions", "phases"):
        if key in keys:
            out.append("\n".join(l for i, l in enumerate(lines) if i != keys[key]))
    if "conflict_budget" not in keys:
        out.append("\n".join(lines + ["conflict_budget: 200000"]))
    return _dedupe(action, out)


def sat_encoding_edits(action: str, limit: int = 6) -> list[str]:
    lines = action.splitlines()
    clause_idx = [i for i, l in enumerate(lines) if l.strip() and not l.lstrip().startswith(("c", "p", "%"))]
    out = []
    for i in sorted(clause_idx, key=lambda i: -len(lines[i].split()))[:limit // 2]:
        kept = lines[:i] + lines[i + 1:]
        out.append("\n".join(_fix_header(kept, -1)))
    for i in [i for i in clause_idx if len(lines[i].split()) == 2][:limit // 2]:
        lit = lines[i].split()[0]
        flipped = lit[1:] if lit.startswith("-") else f"-{lit}"
        out.append("\n".join(lines[:i] + [f"{flipped} 0"] + lines[i + 1:]))
    return _dedupe(action, out)


def _fix_header(lines, delta):
    out = []
    for l in lines:
        parts = l.split()
        if len(parts) == 4 and parts[:2] == ["p", "cnf"]:
            l = f"p cnf {parts[2]} {int(parts[3]) + delta}"
        out.append(l)
    return out


def smt_solver_edits(action: str) -> list[str]:
    lines = [l for l in action.splitlines() if l.strip()]
    out = []
    solver = next((l for l in lines if l.lower().startswith("solver")), "solver: z3")
    other = "cvc5" if "z3" in solver.lower() else "z3"
    out.append("\n".join([f"solver: {other}"] + [l for l in lines if not l.lower().startswith(
        ("solver", "tactic")) and (other == "z3" or not l.lower().startswith("tactic"))]))
    if any(l.lower().startswith("tactic") for l in lines):
        out.append("\n".join(l for l in lines if not l.lower().startswith("tactic")))
    elif "z3" in solver.lower():
        out.append("\n".join(lines + ["tactics: simplify solve-eqs smt"]))
    if any(l.lower().startswith("option") for l in lines):
        out.append("\n".join(l for l in lines if not l.lower().startswith("option")))
    return _dedupe(action, out)


def smt_encoding_edits(action: str, limit: int = 6) -> list[str]:
    out = []
    for m in re.finditer(r"\((>=|<=|>|<)\s", action):
        op = {">=": ">", "<=": "<", ">": ">=", "<": "<="}[m.group(1)]
        out.append(action[: m.start() + 1] + op + action[m.end() - 1:])
        if len(out) >= limit:
            break
    return _dedupe(action, out)


def python_edits(source: str, lines: list[int] | None = None, limit: int = 8) -> list[str]:
    """Comparison, off-by-one and boolean-operator edits on the given (failing) lines."""
    src_lines = source.splitlines(keepends=True)
    targets = lines or list(range(1, len(src_lines) + 1))
    swaps = [(r"<=", "<"), (r"(?<![<>=!])<(?![<=])", "<="), (r">=", ">"),
             (r"(?<![<>=!-])>(?![>=])", ">="), (r"==", "!="), (r"!=", "=="), (r"\band\b", "or"),
             (r"\bor\b", "and"), (r"\+ 1\b", ""), (r"- 1\b", ""), (r"\bTrue\b", "False"),
             (r"\bFalse\b", "True")]
    out = []
    for ln in targets:
        if not 1 <= ln <= len(src_lines):
            continue
        line = src_lines[ln - 1]
        if line.lstrip().startswith(("#", "def ", "class ", "import ", "from ")):
            continue
        for pattern, repl in swaps:
            for m in re.finditer(pattern, line):
                new = line[: m.start()] + repl + line[m.end():]
                out.append("".join(src_lines[: ln - 1] + [new] + src_lines[ln:]))
                break
        for m in re.finditer(r"(\w+)\s*(\]|\))", line):
            if m.group(1).isidentifier() and not m.group(1).isdigit():
                new = line[: m.end(1)] + " + 1" + line[m.end(1):]
                out.append("".join(src_lines[: ln - 1] + [new] + src_lines[ln:]))
                break
    return _dedupe(source, out)[:limit]
