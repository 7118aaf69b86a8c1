"""Headroom calibration: budgets are enforced for every solver, the deterministic SMT
work cap is honoured, and `calibrate` reports the default action's success per budget."""
import dataclasses

import pytest

from countermem_jax.data import calibrate
from evaluators.sat import SATStrategyEvaluator, load_satlib
from evaluators.smt import SMTSolverEvaluator, load_smtlib


@pytest.mark.parametrize("solver", ["glucose4", "glucose3", "minisat22"])
def test_a_solve_past_its_conflict_budget_is_undecided(benchdata, solver):
    tasks = load_satlib(benchdata / "satlib", ["uuf50-218"], limit_per_family=3, max_conflicts=5)
    evaluator = SATStrategyEvaluator(timeout_s=10)
    try:
        outcomes = [evaluator.evaluate(evaluator.reset(t), f"solver: {solver}") for t in tasks]
    finally:
        evaluator.close()
    assert not any(o.success for o in outcomes)
    assert all("Not decided within 5 conflicts" in o.feedback for o in outcomes)


def test_smt_work_cap_applies_to_both_solvers_and_cannot_be_raised(benchdata):
    task = max(load_smtlib(benchdata / "smtlib"), key=lambda t: len(t.reference.script))
    capped = dataclasses.replace(task, reference=dataclasses.replace(task.reference, max_rlimit=50))
    evaluator = SMTSolverEvaluator()
    for action in ("solver: z3", "solver: cvc5", "solver: z3\noption: rlimit=100000000"):
        outcome = evaluator.evaluate(evaluator.reset(capped), action)
        assert not outcome.success and "Undecided" in outcome.feedback, (action, outcome.feedback)
    assert evaluator.evaluate(evaluator.reset(task), "solver: z3").success


def test_calibrate_reports_default_success_per_budget(benchdata):
    rows = calibrate.calibrate_satlib(benchdata / "satlib", solvers=("minisat22",),
                                      budgets=(200_000, 10), families=(("uuf50-218",),))
    assert [(r.budget, r.total) for r in rows] == [("max_conflicts=200000", 50),
                                                   ("max_conflicts=10", 50)]
    assert rows[0].solved == 50 and rows[1].solved < 50
    smt = calibrate.calibrate_smtlib(benchdata / "smtlib", solvers=("z3",), timeouts=(10_000,),
                                     rlimits=(2_000,))
    assert smt[0].solved == smt[0].total == 36 and smt[1].solved < 36
    text = calibrate.format_rows(rows + smt)
    assert "satlib[uuf50-218]" in text and "smt_max_rlimit=2000" in text
    assert calibrate.result_line(rows, 1.0).startswith('result: {"rows": [')


def test_calibrate_lists_spider_questions_with_an_empty_reference(benchdata):
    empty, total = calibrate.empty_reference_tasks(benchdata / "spider")
    assert "spider/concert_singer/14" in empty and "spider/concert_singer/0" not in empty
    assert 0 < len(empty) < total
