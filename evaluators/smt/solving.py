"""Running SMT-LIB 2 scripts in a fresh solver context, with a time limit."""
import dataclasses
import fractions

import z3

try:
    import cvc5
except ImportError:  # the solvers extra may be installed without cvc5
    cvc5 = None


class ScriptError(ValueError):
    """The solver rejected the script (syntax or sort error); the message is the solver's."""


@dataclasses.dataclass(frozen=True)
class SMTResult:
    status: str                      # "sat" | "unsat" | "unknown"
    values: dict                     # declared constant -> Python value (sat only)
    model_valid: bool | None = None  # every assertion true under the model (z3, sat only)
    reason: str = ""


def _py(value):
    if z3.is_int_value(value) or z3.is_bv_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        return fractions.Fraction(value.numerator_as_long(), value.denominator_as_long())
    if z3.is_true(value):
        return True
    if z3.is_false(value):
        return False
    return str(value)


def _parse_value(text: str):
    text = text.strip()
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def run_z3(script: str, timeout_ms: int, tactics: tuple[str, ...] = (),
           options: dict | None = None) -> SMTResult:
    ctx = z3.Context()
    try:
        if tactics:
            tactic = z3.Tactic(tactics[0], ctx) if len(tactics) == 1 else z3.Then(
                *[z3.Tactic(t, ctx) for t in tactics], ctx=ctx)
            solver = tactic.solver()
        else:
            solver = z3.Solver(ctx=ctx)
        solver.from_string(script)
        for key, value in (options or {}).items():
            solver.set(key, _parse_value(value))
        solver.set("timeout", int(timeout_ms))
    except z3.Z3Exception as err:
        raise ScriptError(_z3_message(err)) from None
    answer = solver.check()
    if answer == z3.sat:
        model = solver.model()
        values = {d.name(): _py(model[d]) for d in model.decls() if d.arity() == 0}
        valid = all(z3.is_true(model.eval(a, model_completion=True)) for a in solver.assertions())
        return SMTResult("sat", values, valid)
    if answer == z3.unsat:
        return SMTResult("unsat", {})
    return SMTResult("unknown", {}, reason=solver.reason_unknown())


def run_z3_job(job: tuple) -> SMTResult:
    """``run_z3(*job)`` for the worker process; a rejected script comes back as status "error"
    (exceptions other than the solver's own are the worker's crash)."""
    try:
        return run_z3(*job)
    except ScriptError as err:
        return SMTResult("error", {}, reason=str(err))


def _z3_message(err) -> str:
    msg = err.value if isinstance(err.value, str) else err.value.decode("utf-8", "replace")
    return msg.strip()


def run_cvc5(script: str, timeout_ms: int, options: dict | None = None) -> SMTResult:
    """cvc5 with ``check-models`` on, so a sat answer comes with a model cvc5 itself verified."""
    if cvc5 is None:
        raise ScriptError("cvc5 is not installed (pip install cvc5, or the solvers extra)")
    solver = cvc5.Solver()
    try:
        for key, value in {"produce-models": "true", "check-models": "true",
                           **(options or {}), "tlimit-per": str(int(timeout_ms))}.items():
            solver.setOption(key, str(value))
        parser = cvc5.InputParser(solver)
        parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, script, "action")
        symbols = parser.getSymbolManager()
        status = None
        while True:
            command = parser.nextCommand()
            if command.isNull():
                break
            text = command.toString()
            if text.startswith(("(check-sat", "(get-model", "(get-value", "(exit")):
                continue  # we run check-sat ourselves, once
            command.invoke(solver, symbols)
        result = solver.checkSat()
        status = "sat" if result.isSat() else "unsat" if result.isUnsat() else "unknown"
        values = {}
        if status == "sat":
            for term in symbols.getDeclaredTerms():
                if term.getSort().isFunction():
                    continue
                values[str(term)] = _parse_value(str(solver.getValue(term)))
        return SMTResult(status, values, True if status == "sat" else None)
    except RuntimeError as err:
        raise ScriptError(str(err)) from None
