"""SMT checkers."""
import dataclasses
import re

from evaluators.base import Evaluator, Outcome, Task, truncate
from evaluators.smt import solving
from evaluators.worker import WorkerPool


MAX_INDEX = 4096   # largest bit-vector width / extension an encoding action may use
_INDEXED = re.compile(r"\(\s*_\s+[^\s()]+((?:\s+\d+)+)\s*\)")


def check_indices(script: str) -> None:
    """Refuses indexed sorts and operators (``(_ BitVec n)``, ``(_ zero_extend n)``, ``(_ bv5 n)``)
    above MAX_INDEX: z3 bit-blasts them without looking at its timeout (a 10^8-bit ``bvmul``
    takes ~30 s and ~5 GB; up to 4096 bits the deadline holds)."""
    for match in _INDEXED.finditer(script):
        for number in match.group(1).split():
            if int(number) > MAX_INDEX:
                raise solving.ScriptError(f"index {number} in {match.group(0)[:60]!r} is above "
                                          f"{MAX_INDEX}")


@dataclasses.dataclass(frozen=True)
class EncodingReference:
    problem: object


@dataclasses.dataclass(frozen=True)
class FileReference:
    script: str
    status: str          # declared "sat" / "unsat"
    max_timeout_ms: int = 10_000
    # Deterministic work cap (z3 ``rlimit``, cvc5 ``rlimit-per``), 0 = none: unlike a time limit
    # it gives the same verdict on any machine and under any load (docs/data.md, "Headroom").
    max_rlimit: int = 0


def _capped_options(options: dict, solver: str, cap: int) -> dict:
    """The action's options with the task's work cap applied (a lower value of its own stays)."""
    if not cap:
        return options
    key = "rlimit" if solver == "z3" else "rlimit-per"
    try:
        mine = int(options.get(key, cap))
    except (TypeError, ValueError):
        mine = cap
    return {**options, key: str(min(mine, cap) if mine > 0 else cap)}


class SMTEncodingEvaluator(Evaluator):
    name = "z3-encoding"
    version = f"1+z3-{solving.z3.get_version_string()}"

    def __init__(self, timeout_ms: int = 5000, memory_bytes: int = 2 << 30,
                 workers: int | None = None):
        self.timeout_ms = timeout_ms
        self._worker = WorkerPool("evaluators.smt._worker", workers, memory_bytes)

    def _check(self, task: Task, action: str) -> Outcome:
        problem = task.reference.problem
        try:
            check_indices(action)
            result = self._worker.call((action, self.timeout_ms), self.timeout_ms / 1000 + 2.0,
                                       "z3")
        except solving.ScriptError as err:
            return Outcome(0.0, False, True, f"Solver error: {truncate(str(err), 600)}")
        if result.status == "error":
            return Outcome(0.0, False, True, f"Solver error: {truncate(result.reason, 600)}")
        if result.status == "unknown":
            return Outcome(0.0, False, False, f"Solver gave up: {result.reason}", reason="timeout")
        if result.status == "unsat":
            return Outcome(0.0, False, True, "Your constraints are unsatisfiable, but the problem "
                           "has a solution.", details={"status": "unsat"})
        check = problem.validate(result.values)
        ok = not check.violations
        feedback = ("Correct: the model satisfies every constraint of the problem." if ok else
                    f"The model satisfies {check.satisfied}/{check.total} constraints. "
                    f"Violations: {truncate('; '.join(check.violations), 600)}")
        return Outcome(1.0 if ok else check.utility, ok, True, feedback,
                       details={"status": "sat", "satisfied": check.satisfied,
                                "total": check.total})

    def close(self) -> None:
        self._worker.close()


@dataclasses.dataclass(frozen=True)
class SolverAction:
    solver: str
    tactics: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    timeout_ms: int | None = None


def parse_solver_action(text: str) -> SolverAction:
    fields = {"tactics": (), "options": ()}
    solver, timeout = None, None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^(solver|tactics?|option|timeout_ms)\s*[:=]\s*(.+)$", line)
        if not m:
            raise ValueError(f"line {lineno}: expected 'solver:', 'tactics:', 'option:' or "
                             f"'timeout_ms:', got {raw.strip()!r}")
        key, value = m.group(1), m.group(2).strip()
        if key == "solver":
            solver = value.lower()
            if solver not in ("z3", "cvc5"):
                raise ValueError(f"solver must be z3 or cvc5, got {value!r}")
        elif key.startswith("tactic"):
            fields["tactics"] += tuple(value.replace(",", " ").split())
        elif key == "option":
            if "=" not in value:
                raise ValueError(f"line {lineno}: option needs key=value")
            k, v = value.split("=", 1)
            fields["options"] += ((k.strip(), v.strip()),)
        else:
            try:
                timeout = int(value)
            except ValueError:
                raise ValueError(f"line {lineno}: timeout_ms must be an integer") from None
    if solver is None:
        raise ValueError("missing 'solver: z3|cvc5'")
    if fields["tactics"] and solver != "z3":
        raise ValueError("tactics are only available with z3")
    return SolverAction(solver, fields["tactics"], fields["options"], timeout)


class SMTSolverEvaluator(Evaluator):
    name = "smt-solver-action"
    version = f"1+z3-{solving.z3.get_version_string()}"

    def _check(self, task: Task, action: str) -> Outcome:
        ref: FileReference = task.reference
        try:
            act = parse_solver_action(action)
        except ValueError as err:
            return Outcome(0.0, False, True, f"Invalid solver action: {err}")
        timeout = min(act.timeout_ms or ref.max_timeout_ms, ref.max_timeout_ms)
        try:
            options = _capped_options(dict(act.options), act.solver, ref.max_rlimit)
            if act.solver == "z3":
                result = solving.run_z3(ref.script, timeout, act.tactics, options)
            else:
                result = solving.run_cvc5(ref.script, timeout, options)
        except solving.ScriptError as err:
            return Outcome(0.0, False, True, f"Solver rejected the configuration: "
                           f"{truncate(str(err), 600)}")
        details = {"status": result.status, "solver": act.solver}
        if result.status == "unknown":
            return Outcome(0.0, False, True, f"Undecided within {timeout} ms "
                           f"({result.reason or 'unknown'}).", details=details)
        if result.status != ref.status:
            return Outcome(0.0, False, True, f"The solver answered {result.status}, which contradicts "
                           "the instance's declared status.", details=details)
        if result.status == "sat" and not result.model_valid:
            return Outcome(0.0, False, True, "The solver's model does not satisfy every assertion.",
                           details=details)
        return Outcome(1.0, True, True, f"Reproduced the declared status ({result.status})"
                       + (" with a validated model." if result.status == "sat" else "."),
                       details=details)
