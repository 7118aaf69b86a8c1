"""Combinatorial problems for SAT encoding tasks, each with an independent validator."""
import dataclasses
import itertools
import random
import re

from evaluators.constraints import ConstraintCheck as Validation


def _true_names(model, names) -> set[str]:
    return {names[lit] for lit in model if lit > 0 and lit in names}


def _pairs(true: set[str], prefix: str, arity: int = 2) -> list[tuple[int, ...]]:
    pat = re.compile(rf"^{prefix}" + "_(\\d+)" * arity + "$")
    return [tuple(int(g) for g in m.groups()) for n in true if (m := pat.match(n))]


@dataclasses.dataclass(frozen=True)
class GraphColoring:
    """Colour vertices 1..n with colours 1..k so that adjacent vertices differ.
    Variable x_<v>_<c>: vertex v has colour c."""
    n: int
    k: int
    edges: tuple[tuple[int, int], ...]
    name: str = "graph colouring"

    def describe(self) -> str:
        edges = " ".join(f"{a}-{b}" for a, b in self.edges)
        return (f"Colour the {self.n} vertices (1..{self.n}) of this graph with at most {self.k} "
                f"colours (1..{self.k}) so that the two ends of every edge get different colours.\n"
                f"Edges ({len(self.edges)}): {edges}\n"
                "Name the variable meaning 'vertex v has colour c' x_v_c (for example x_3_2).")

    def validate(self, model, names) -> Validation:
        colours: dict[int, set[int]] = {}
        for v, c in _pairs(_true_names(model, names), "x"):
            if 1 <= v <= self.n and 1 <= c <= self.k:
                colours.setdefault(v, set()).add(c)
        chosen = {v: min(cs) for v, cs in colours.items()}
        violations = [f"vertex {v} has no colour" for v in range(1, self.n + 1) if v not in chosen]
        violations += [f"vertex {v} has several colours {sorted(cs)}" for v, cs in colours.items()
                       if len(cs) > 1]
        violations += [f"edge {a}-{b} joins two vertices of colour {chosen[a]}"
                       for a, b in self.edges if a in chosen and b in chosen and chosen[a] == chosen[b]]
        total = self.n + len(self.edges)
        return Validation(max(0, total - len(violations)), total, tuple(violations))


@dataclasses.dataclass(frozen=True)
class NQueens:
    """Place n queens on an n×n board, none attacking another. Variable q_<r>_<c>."""
    n: int
    name: str = "n-queens"

    def describe(self) -> str:
        return (f"Place {self.n} queens on a {self.n}x{self.n} chess board (rows and columns "
                f"1..{self.n}) so that no two queens share a row, a column or a diagonal.\n"
                "Name the variable meaning 'a queen stands on row r, column c' q_r_c.")

    def validate(self, model, names) -> Validation:
        queens = [(r, c) for r, c in _pairs(_true_names(model, names), "q")
                  if 1 <= r <= self.n and 1 <= c <= self.n]
        rows = {r: [q for q in queens if q[0] == r] for r in range(1, self.n + 1)}
        violations = [f"row {r} has {len(qs)} queens" for r, qs in rows.items() if len(qs) != 1]
        attacks = [(a, b) for a, b in itertools.combinations(queens, 2)
                   if a[1] == b[1] or abs(a[0] - b[0]) == abs(a[1] - b[1])]
        violations += [f"queens {a} and {b} attack each other" for a, b in attacks[:10]]
        total = self.n + 1  # one constraint per row, plus "no two queens attack"
        return Validation(self.n - sum(len(q) != 1 for q in rows.values()) + (not attacks), total,
                          tuple(violations))


@dataclasses.dataclass(frozen=True)
class PigeonAssignment:
    """Put pigeons 1..p into holes 1..h, one pigeon per hole, avoiding forbidden pairs.
    Variable p_<i>_<j>: pigeon i sits in hole j."""
    pigeons: int
    holes: int
    forbidden: tuple[tuple[int, int], ...]
    name: str = "pigeonhole assignment"

    def describe(self) -> str:
        bad = " ".join(f"{i}/{j}" for i, j in self.forbidden)
        return (f"Put each of {self.pigeons} pigeons (1..{self.pigeons}) into exactly one of "
                f"{self.holes} holes (1..{self.holes}); no hole may hold two pigeons, and these "
                f"pigeon/hole pairs are forbidden: {bad or 'none'}.\n"
                "Name the variable meaning 'pigeon i sits in hole j' p_i_j.")

    def validate(self, model, names) -> Validation:
        seat: dict[int, set[int]] = {}
        for i, j in _pairs(_true_names(model, names), "p"):
            if 1 <= i <= self.pigeons and 1 <= j <= self.holes:
                seat.setdefault(i, set()).add(j)
        violations = [f"pigeon {i} sits in {len(seat.get(i, ()))} holes"
                      for i in range(1, self.pigeons + 1) if len(seat.get(i, ())) != 1]
        placed = {i: next(iter(js)) for i, js in seat.items() if len(js) == 1}
        forbidden = set(self.forbidden)
        violations += [f"pigeon {i} in forbidden hole {j}" for i, j in placed.items()
                       if (i, j) in forbidden]
        by_hole: dict[int, list[int]] = {}
        for i, j in placed.items():
            by_hole.setdefault(j, []).append(i)
        violations += [f"hole {j} holds pigeons {ps}" for j, ps in by_hole.items() if len(ps) > 1]
        total = 2 * self.pigeons + self.holes
        return Validation(max(0, total - len(violations)), total, tuple(violations))


@dataclasses.dataclass(frozen=True)
class Scheduling:
    """Give jobs 1..n a time slot 1..t: conflicting jobs differ, precedences hold strictly.
    Variable s_<job>_<slot>."""
    jobs: int
    slots: int
    conflicts: tuple[tuple[int, int], ...]
    precedences: tuple[tuple[int, int], ...]  # (a, b): a's slot < b's slot
    name: str = "scheduling"

    def describe(self) -> str:
        conf = " ".join(f"{a}-{b}" for a, b in self.conflicts)
        prec = " ".join(f"{a}<{b}" for a, b in self.precedences)
        return (f"Schedule {self.jobs} jobs (1..{self.jobs}) into {self.slots} time slots "
                f"(1..{self.slots}), one slot per job. Conflicting jobs must get different slots: "
                f"{conf or 'none'}. A precedence a<b means job a's slot is strictly earlier than "
                f"job b's: {prec or 'none'}.\n"
                "Name the variable meaning 'job j runs in slot s' s_j_s.")

    def validate(self, model, names) -> Validation:
        slots: dict[int, set[int]] = {}
        for j, s in _pairs(_true_names(model, names), "s"):
            if 1 <= j <= self.jobs and 1 <= s <= self.slots:
                slots.setdefault(j, set()).add(s)
        violations = [f"job {j} has {len(slots.get(j, ()))} slots" for j in range(1, self.jobs + 1)
                      if len(slots.get(j, ())) != 1]
        at = {j: next(iter(s)) for j, s in slots.items() if len(s) == 1}
        violations += [f"conflicting jobs {a} and {b} share slot {at[a]}" for a, b in self.conflicts
                       if a in at and b in at and at[a] == at[b]]
        violations += [f"job {a} (slot {at[a]}) is not before job {b} (slot {at[b]})"
                       for a, b in self.precedences if a in at and b in at and at[a] >= at[b]]
        total = self.jobs + len(self.conflicts) + len(self.precedences)
        return Validation(max(0, total - len(violations)), total, tuple(violations))


def graph_from_flat_cnf(num_vars: int, clauses, k: int = 3) -> GraphColoring:
    """Recovers the graph of a SATLIB ``flat`` instance (variable 3(v−1)+c = vertex v, colour c):
    every negative binary clause between two different vertices' variables is an edge."""
    n = num_vars // k
    edges = set()
    for clause in clauses:
        if len(clause) == 2 and clause[0] < 0 and clause[1] < 0:
            a, b = (-clause[0] - 1) // k + 1, (-clause[1] - 1) // k + 1
            if a != b:
                edges.add((min(a, b), max(a, b)))
    return GraphColoring(n, k, tuple(sorted(edges)))


def generate(family: str, seed: int):
    """A small satisfiable instance of a generated family (deterministic in ``seed``)."""
    rng = random.Random(seed)
    if family == "nqueens":
        return NQueens(rng.choice([4, 5, 6, 8]))
    if family == "pigeonhole":
        holes = rng.randint(4, 7)
        pigeons = rng.randint(3, holes)
        hidden = dict(zip(range(1, pigeons + 1), rng.sample(range(1, holes + 1), pigeons)))
        pairs = [(i, j) for i in range(1, pigeons + 1) for j in range(1, holes + 1)
                 if hidden[i] != j]
        return PigeonAssignment(pigeons, holes, tuple(sorted(rng.sample(pairs, len(pairs) // 3))))
    if family == "scheduling":
        jobs, slots = rng.randint(5, 9), rng.randint(3, 4)
        hidden = {j: rng.randint(1, slots) for j in range(1, jobs + 1)}
        pairs = list(itertools.combinations(range(1, jobs + 1), 2))
        conflicts = [(a, b) for a, b in pairs if hidden[a] != hidden[b] and rng.random() < 0.3]
        precedences = [(a, b) if hidden[a] < hidden[b] else (b, a) for a, b in pairs
                       if hidden[a] != hidden[b] and rng.random() < 0.12]
        return Scheduling(jobs, slots, tuple(conflicts), tuple(sorted(precedences)))
    if family == "coloring":
        n, k = rng.randint(6, 12), 3
        hidden = {v: rng.randint(1, k) for v in range(1, n + 1)}
        edges = [(a, b) for a, b in itertools.combinations(range(1, n + 1), 2)
                 if hidden[a] != hidden[b] and rng.random() < 0.35]
        return GraphColoring(n, k, tuple(edges))
    raise ValueError(f"unknown problem family {family!r}")


def reference_encoding(problem) -> str:
    """A correct DIMACS encoding with variable map (used to test the checker end to end)."""
    names: dict[str, int] = {}

    def var(name):
        return names.setdefault(name, len(names) + 1)

    clauses = []

    def exactly_one(vs):
        clauses.append(list(vs))
        clauses.extend([-a, -b] for a, b in itertools.combinations(vs, 2))

    if isinstance(problem, GraphColoring):
        for v in range(1, problem.n + 1):
            exactly_one([var(f"x_{v}_{c}") for c in range(1, problem.k + 1)])
        for a, b in problem.edges:
            clauses.extend([-var(f"x_{a}_{c}"), -var(f"x_{b}_{c}")] for c in range(1, problem.k + 1))
    elif isinstance(problem, NQueens):
        n = problem.n
        for r in range(1, n + 1):
            exactly_one([var(f"q_{r}_{c}") for c in range(1, n + 1)])
        cells = [(r, c) for r in range(1, n + 1) for c in range(1, n + 1)]
        for (r1, c1), (r2, c2) in itertools.combinations(cells, 2):
            if c1 == c2 or abs(r1 - r2) == abs(c1 - c2):
                clauses.append([-var(f"q_{r1}_{c1}"), -var(f"q_{r2}_{c2}")])
    elif isinstance(problem, PigeonAssignment):
        for i in range(1, problem.pigeons + 1):
            exactly_one([var(f"p_{i}_{j}") for j in range(1, problem.holes + 1)])
        for j in range(1, problem.holes + 1):
            for a, b in itertools.combinations(range(1, problem.pigeons + 1), 2):
                clauses.append([-var(f"p_{a}_{j}"), -var(f"p_{b}_{j}")])
        clauses.extend([-var(f"p_{i}_{j}")] for i, j in problem.forbidden)
    elif isinstance(problem, Scheduling):
        for j in range(1, problem.jobs + 1):
            exactly_one([var(f"s_{j}_{s}") for s in range(1, problem.slots + 1)])
        for a, b in problem.conflicts:
            clauses.extend([-var(f"s_{a}_{s}"), -var(f"s_{b}_{s}")] for s in range(1, problem.slots + 1))
        for a, b in problem.precedences:
            for sa in range(1, problem.slots + 1):
                for sb in range(1, sa + 1):
                    clauses.append([-var(f"s_{a}_{sa}"), -var(f"s_{b}_{sb}")])
    else:
        raise TypeError(type(problem).__name__)
    lines = [f"c var {v} {n}" for n, v in names.items()]
    lines.append(f"p cnf {len(names)} {len(clauses)}")
    lines += [" ".join(map(str, c)) + " 0" for c in clauses]
    return "\n".join(lines) + "\n"
