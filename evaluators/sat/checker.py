"""SAT checkers."""
import dataclasses
import re

from evaluators.base import Evaluator, Outcome, Task, truncate
from evaluators.sat import dimacs, solving


@dataclasses.dataclass(frozen=True)
class EncodingReference:
    problem: object
    solver: str = "glucose4"


@dataclasses.dataclass(frozen=True)
class StrategyReference:
    num_vars: int
    clauses: tuple
    status: str            # known "SAT" / "UNSAT"
    max_conflicts: int = 200_000


class _SolverEvaluator(Evaluator):
    """Shares one solver runner (and its pool of worker processes) between checks."""

    def __init__(self, timeout_s: float = 10.0, runner: solving.SolverRunner | None = None):
        self.timeout_s = timeout_s
        self.runner = runner or solving.SolverRunner()

    def close(self):
        self.runner.close()


class SATEncodingEvaluator(_SolverEvaluator):
    name = "pysat-encoding"
    version = "1"
    max_var = 1_000_000   # largest variable an encoding action may use

    def _check(self, task: Task, action: str) -> Outcome:
        ref: EncodingReference = task.reference
        try:
            cnf = dimacs.parse(action, max_var=self.max_var)
        except dimacs.DimacsError as err:
            return Outcome(0.0, False, True, f"Malformed CNF: {err}")
        if not cnf.names:
            return Outcome(0.0, False, True, "The CNF has no variable map: add lines "
                           "'c var <number> <name>' using the names the task asks for.")
        result = self.runner.solve(solving.SolveJob(ref.solver, cnf.clauses), self.timeout_s)
        if result.status == "UNSAT":
            return Outcome(0.0, False, True, "Your encoding is unsatisfiable, but the problem has "
                           "a solution: some clause forbids a valid answer.",
                           details={"status": "UNSAT"})
        if not dimacs.satisfies(cnf.clauses, result.model):
            raise RuntimeError("solver returned a model that violates the CNF")
        check = ref.problem.validate(result.model, cnf.names)
        ok = not check.violations
        feedback = ("Correct: the decoded answer satisfies every constraint." if ok else
                    f"The decoded answer satisfies {check.satisfied}/{check.total} constraints. "
                    f"Violations: {truncate('; '.join(check.violations), 600)}")
        return Outcome(check.utility if not ok else 1.0, ok, True, feedback,
                       details={"status": "SAT", "satisfied": check.satisfied, "total": check.total})


_KEYS = {"solver", "assumptions", "phases", "conflict_budget"}


def parse_strategy(text: str) -> solving.SolveJob:
    """Parses the strategy language above; ValueError names the bad line."""
    fields = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^([a-z_]+)\s*[:=]\s*(.*)$", line)
        if not m or m.group(1) not in _KEYS:
            raise ValueError(f"line {lineno}: expected one of {sorted(_KEYS)} as 'key: value', "
                             f"got {raw.strip()!r}")
        fields[m.group(1)] = m.group(2).strip()
    if "solver" not in fields:
        raise ValueError("missing 'solver: NAME'")
    lits = {}
    for key in ("assumptions", "phases"):
        try:
            lits[key] = tuple(int(t) for t in fields.get(key, "").replace(",", " ").split())
        except ValueError:
            raise ValueError(f"{key}: literals must be non-zero integers") from None
        if 0 in lits[key]:
            raise ValueError(f"{key}: literal 0 is not allowed")
    budget = fields.get("conflict_budget")
    return solving.SolveJob(fields["solver"].lower(), (), lits["assumptions"], lits["phases"],
                            int(budget) if budget else None)


class SATStrategyEvaluator(_SolverEvaluator):
    name = "pysat-strategy"
    version = "1"

    def _check(self, task: Task, action: str) -> Outcome:
        ref: StrategyReference = task.reference
        try:
            job = parse_strategy(action)
            if job.solver not in solving.KNOWN:
                raise ValueError(f"unknown solver {job.solver!r}; choose one of "
                                 f"{sorted(solving.KNOWN)}")
            bad = [lit for lit in job.assumptions + job.phases if abs(lit) > ref.num_vars]
            if bad:
                raise ValueError(f"literal {bad[0]} outside variables 1..{ref.num_vars}")
        except ValueError as err:
            return Outcome(0.0, False, True, f"Invalid strategy: {err}")
        budget = min(job.conflict_budget or ref.max_conflicts, ref.max_conflicts)
        job = dataclasses.replace(job, clauses=ref.clauses, conflict_budget=budget)
        result = self.runner.solve(job, self.timeout_s)
        details = {"status": result.status, "conflicts": result.conflicts, "solver": job.solver}
        if result.conflicts > budget:
            # Some solvers (pysat's Glucose 3/4) overrun conf_budget: past the budget is undecided.
            details["over_budget"] = True
            return Outcome(0.0, False, True, f"Not decided within {budget} conflicts "
                           f"({job.solver} needed {result.conflicts}).", details=details)
        if result.status == "UNKNOWN":
            return Outcome(0.0, False, True, f"Not decided within {budget} conflicts "
                           f"({job.solver}).", details=details)
        if result.status == "SAT":
            if not dimacs.satisfies(ref.clauses, result.model):
                return Outcome(0.0, False, True, "The solver's model violates the formula.",
                               details=details)
            return Outcome(1.0, True, True, f"Decided SAT with a verified model after "
                           f"{result.conflicts} conflicts.", details=details)
        if job.assumptions:
            return Outcome(0.0, False, True, "UNSAT under your assumptions: that only refutes the "
                           "cube, it does not decide the instance.", details=details)
        ok = ref.status == "UNSAT"
        return Outcome(1.0 if ok else 0.0, ok, True,
                       f"Decided UNSAT after {result.conflicts} conflicts." if ok else
                       "The solver answered UNSAT, which contradicts the instance's known status.",
                       details=details)
