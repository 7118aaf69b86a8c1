"""DIMACS CNF parsing, with the optional variable map used by encoding tasks."""
import dataclasses
import re

_VAR = re.compile(r"^c\s+var\s+(\d+)\s+(\S+)\s*$")


class DimacsError(ValueError):
    """Malformed CNF; the message names the line."""


@dataclasses.dataclass(frozen=True)
class CNF:
    num_vars: int
    clauses: tuple[tuple[int, ...], ...]
    names: dict  # var -> name, from "c var N NAME" lines


def parse(text: str, max_clauses: int = 2_000_000, max_var: int | None = None) -> CNF:
    """Parses DIMACS CNF with a ``c var <n> <name>`` map. ``max_var`` bounds the literals
    actually used (solvers allocate per variable up to the largest one: a clause ``2000000000 0``
    alone costs gigabytes and a minute before the deadline can act)."""
    header = None
    clauses, current, names = [], [], {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("c"):
            if m := _VAR.match(line):
                names[int(m.group(1))] = m.group(2)
            continue
        if line.startswith("%"):
            break
        if line.startswith("p"):
            parts = line.split()
            if header is not None or len(parts) != 4 or parts[1] != "cnf":
                raise DimacsError(f"line {lineno}: bad problem line {line!r} (expected 'p cnf V C')")
            try:
                header = (int(parts[2]), int(parts[3]))
            except ValueError:
                raise DimacsError(f"line {lineno}: bad problem line {line!r}") from None
            continue
        if header is None:
            raise DimacsError(f"line {lineno}: clause before the 'p cnf' line")
        for token in line.split():
            try:
                lit = int(token)
            except ValueError:
                raise DimacsError(f"line {lineno}: {token!r} is not a literal") from None
            if lit == 0:
                clauses.append(tuple(current))
                current = []
                if len(clauses) > max_clauses:
                    raise DimacsError(f"more than {max_clauses} clauses")
            else:
                if max_var is not None and abs(lit) > max_var:
                    raise DimacsError(f"line {lineno}: literal {lit} is above the {max_var} "
                                      "variables an encoding may use")
                if abs(lit) > header[0]:
                    raise DimacsError(f"line {lineno}: literal {lit} exceeds the {header[0]} "
                                      "declared variables")
                current.append(lit)
    if header is None:
        raise DimacsError("no 'p cnf' line")
    if current:
        clauses.append(tuple(current))
    for var in names:
        if not 1 <= var <= header[0]:
            raise DimacsError(f"variable map names variable {var}, outside 1..{header[0]}")
    return CNF(header[0], tuple(clauses), names)


def satisfies(clauses, model) -> bool:
    """Does the model (a list of signed literals) satisfy every clause?"""
    true = {lit for lit in model if lit}
    return all(any(lit in true for lit in clause) for clause in clauses)
