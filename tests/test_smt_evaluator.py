"""SMT world models on SMT-LIB files (z3, cvc5) and generated encoding problems."""
import pytest

from evaluators.base import Task
from evaluators.smt import SMTEncodingEvaluator, SMTSolverEvaluator, encoding_tasks, load_smtlib
from evaluators.smt import problems
from evaluators.smt.checker import FileReference, parse_solver_action


@pytest.fixture(scope="module")
def smtlib(benchdata):
    return load_smtlib(benchdata / "smtlib")


def test_every_smtlib_status_is_reproduced_by_z3(smtlib):
    evaluator = SMTSolverEvaluator()
    assert len(smtlib) >= 30 and {t.reference.status for t in smtlib} == {"sat", "unsat"}
    for task in smtlib:
        outcome = evaluator.evaluate(evaluator.reset(task), "solver: z3")
        assert outcome.success, (task.task_id, outcome.feedback)


def test_cvc5_and_tactics_reproduce_small_instances(smtlib):
    evaluator = SMTSolverEvaluator()
    small = sorted(smtlib, key=lambda t: len(t.reference.script))[:4]
    for task in small:
        assert evaluator.evaluate(evaluator.reset(task), "solver: cvc5").success, task.task_id
    lia = next(t for t in small if t.environment == "QF_LIA") if any(
        t.environment == "QF_LIA" for t in small) else small[0]
    outcome = evaluator.evaluate(evaluator.reset(lia), "solver: z3\ntactics: simplify smt")
    assert outcome.success, outcome.feedback


def _file_task(script, status):
    return Task("t", "smt", "smtlib", "", "", "solver action",
                reference=FileReference(script, status, 2000))


def test_script_with_syntax_error_gives_a_clean_failed_outcome():
    evaluator = SMTEncodingEvaluator()
    task = encoding_tasks(per_family=1)[0]
    outcome = evaluator.evaluate(evaluator.reset(task), "(declare-const a Int)\n(assert (> a)")
    assert outcome.completed and not outcome.success
    assert outcome.feedback.startswith("Solver error:") and "line 2" in outcome.feedback


def test_declared_status_mismatch_fails():
    evaluator = SMTSolverEvaluator()
    script = "(declare-const x Int)(assert (> x 1))(assert (< x 0))(check-sat)"
    assert evaluator.evaluate(evaluator.reset(_file_task(script, "unsat")), "solver: z3").success
    wrong = evaluator.evaluate(evaluator.reset(_file_task(script, "sat")), "solver: z3")
    assert wrong.completed and not wrong.success and "contradicts" in wrong.feedback
    bad_option = evaluator.evaluate(evaluator.reset(_file_task(script, "unsat")),
                                    "solver: z3\noption: no.such.param=1")
    assert bad_option.completed and not bad_option.success


def test_generated_reference_scripts_are_correct():
    evaluator = SMTEncodingEvaluator()
    for task in encoding_tasks(per_family=4):
        outcome = evaluator.evaluate(evaluator.reset(task),
                                     problems.reference_script(task.reference.problem))
        assert outcome.success, (task.task_id, outcome.feedback)


def test_satisfiable_but_wrong_encoding_fails_validation():
    task = next(t for t in encoding_tasks(per_family=6) if t.environment == "lia" and
                t.reference.problem.validate({n: 0 for n in t.reference.problem.names}).violations)
    problem = task.reference.problem
    script = "\n".join([f"(declare-const {n} Int)" for n in problem.names]
                       + [f"(assert (= {n} 0))" for n in problem.names] + ["(check-sat)"])
    outcome = SMTEncodingEvaluator().evaluate(SMTEncodingEvaluator().reset(task), script)
    assert outcome.completed and not outcome.success and outcome.details["status"] == "sat"
    assert 0 <= outcome.utility < 1 and "violated" in outcome.feedback


def test_unsat_encoding_fails():
    task = encoding_tasks(per_family=1)[0]
    outcome = SMTEncodingEvaluator().evaluate(
        SMTEncodingEvaluator().reset(task), "(declare-const a Int)(assert (> a 1))(assert (< a 0))")
    assert outcome.completed and not outcome.success and "unsatisfiable" in outcome.feedback


def test_solver_action_parser():
    act = parse_solver_action("solver: z3\ntactics: simplify, solve-eqs smt\noption: a=1\n"
                              "timeout_ms: 500")
    assert act.tactics == ("simplify", "solve-eqs", "smt") and act.options == (("a", "1"),)
    with pytest.raises(ValueError, match="only available with z3"):
        parse_solver_action("solver: cvc5\ntactics: smt")
    with pytest.raises(ValueError, match="z3 or cvc5"):
        parse_solver_action("solver: yices")
