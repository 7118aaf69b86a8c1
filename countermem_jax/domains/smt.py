"""SMT (SMT-LIB / SMT-COMP, and the generated encoding extra; paper Appendix D.1): the two SMT
domains, their rule edit operators of Module I (paper §3.2, Appendix B.4) and their loaders.

SMT solver action: 'key: value' lines (solver, tactics, options); an edit changes one of them.
SMT encoding: an SMT-LIB 2 script; an edit flips one comparison boundary in an assertion.
"""
import dataclasses
import re

from countermem_jax.domains.base import Domain, data_dir, distinct_edits, require

# Models often tag SMT-LIB as lisp or scheme, whose syntax it borrows.
_SMT_FENCES = ("smt2", "smt", "lisp", "scheme")


def smt_solver_edits(action: str) -> list[str]:
    """A solver action with one setting changed: the other solver, tactics dropped or added,
    options dropped."""
    lines = [l for l in action.splitlines() if l.strip()]
    out = []
    solver = next((l for l in lines if l.lower().startswith("solver")), "solver: z3")
    # The other solver with the same options; tactics are z3-only in the checker's action
    # format and are dropped in the switch.
    other = "cvc5" if "z3" in solver.lower() else "z3"
    out.append("\n".join([f"solver: {other}"] + [l for l in lines if not l.lower().startswith(
        ("solver", "tactic")) and (other == "z3" or not l.lower().startswith("tactic"))]))
    if any(l.lower().startswith("tactic") for l in lines):
        out.append("\n".join(l for l in lines if not l.lower().startswith("tactic")))
    elif "z3" in solver.lower():
        # A preprocessing pipeline for z3 that eliminates equalities before the main search.
        out.append("\n".join(lines + ["tactics: simplify solve-eqs smt"]))
    if any(l.lower().startswith("option") for l in lines):
        out.append("\n".join(l for l in lines if not l.lower().startswith("option")))
    return distinct_edits(action, out)


def smt_encoding_edits(action: str, limit: int = 6) -> list[str]:
    """An SMT-LIB script with one comparison boundary in an assertion flipped."""
    out = []
    # Only prefix-notation operators ``(op `` count, so ``=>`` (implication) and names with
    # ``<`` or ``>`` in them are never flipped.
    for m in re.finditer(r"\((>=|<=|>|<)\s", action):
        op = {">=": ">", "<=": "<", ">": ">=", "<": "<="}[m.group(1)]
        out.append(action[: m.start() + 1] + op + action[m.end() - 1:])
        if len(out) >= limit:
            break
    return distinct_edits(action, out)


SMT_SOLVER = Domain(
    "smt", "Write the solver action as 'key: value' lines in a ``` code block.",
    "A condition may test 'logic == <name>' or 'family == <name>'.",
    lambda task, action: smt_solver_edits(action), fences=_SMT_FENCES)

SMT_ENCODING = Domain(
    "smt", "Write the SMT-LIB 2 script in a ```smt2 code block.",
    "A condition may test 'problem == <name>' or 'family == <name>'.",
    lambda task, action: smt_encoding_edits(action), fences=_SMT_FENCES)


# --- Loaders ---------------------------------------------------------------------------------

def smtlib_tasks(data_cfg):
    """SMT-LIB instances listed in the data's manifest (``smt_logics`` selects logics;
    ``smt_max_rlimit`` caps the resource limit of every task)."""
    from evaluators.smt import load_smtlib
    root = require(data_dir(data_cfg, "smtlib"), "smtlib",
                   "SMT-LIB (manifest.jsonl and .smt2 files)")
    tasks = load_smtlib(root, tuple(data_cfg.get("smt_logics") or ()) or None,
                        max_timeout_ms=data_cfg.get("smt_max_timeout_ms", 10_000))
    rlimit = data_cfg.get("smt_max_rlimit", 0)
    return [dataclasses.replace(t, reference=dataclasses.replace(t.reference, max_rlimit=rlimit))
            for t in tasks] if rlimit else tasks


def smt_encoding_tasks(data_cfg):
    """Generated SMT encoding problems (no data needed)."""
    from evaluators.smt import encoding_tasks
    return encoding_tasks(data_cfg.get("generated_per_family", 20))


def smt_solver_evaluator(data_cfg):
    """The SMT solver-action checker (z3 or cvc5)."""
    from evaluators.smt import SMTSolverEvaluator
    return SMTSolverEvaluator()


def smt_encoding_evaluator(data_cfg):
    """The SMT encoding checker (z3, then the model re-checked against the constraints)."""
    from evaluators.smt import SMTEncodingEvaluator
    return SMTEncodingEvaluator()
