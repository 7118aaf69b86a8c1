"""SAT world models on SATLIB files and generated encoding problems."""
import subprocess

import pytest

from evaluators.base import Task
from evaluators.sat import (SATEncodingEvaluator, SATStrategyEvaluator, encoding_tasks,
                            load_satlib)
from evaluators.sat import dimacs, problems, solving
from evaluators.sat.checker import StrategyReference, parse_strategy
from helpers import pigeonhole


@pytest.fixture(scope="module")
def runner():
    r = solving.SolverRunner()
    yield r
    r.close()


@pytest.fixture(scope="module")
def satlib(benchdata):
    return load_satlib(benchdata / "satlib", limit_per_family=6)


@pytest.mark.parametrize("solver", ["glucose4", "cadical195"])
def test_satlib_statuses_are_reproduced(satlib, runner, solver):
    evaluator = SATStrategyEvaluator(timeout_s=20, runner=runner)
    families = {t.environment for t in satlib}
    assert {"uf20-91", "uf50-218", "uuf50-218", "flat30-60"} <= families
    for task in satlib:
        outcome = evaluator.evaluate(evaluator.reset(task), f"solver: {solver}")
        assert outcome.success, (task.task_id, outcome.feedback)
        assert outcome.details["status"] == task.reference.status


def test_refuting_a_cube_does_not_decide_the_instance(satlib, runner):
    task = next(t for t in satlib if t.reference.status == "SAT")
    evaluator = SATStrategyEvaluator(runner=runner)
    model = evaluator.runner.solve(solving.SolveJob("glucose4", task.reference.clauses), 5).model
    cube = " ".join(str(-lit) for lit in model[:20])  # contradicts the model on many variables
    outcome = evaluator.evaluate(evaluator.reset(task), f"solver: glucose4\nassumptions: {cube}")
    assert not outcome.success
    if outcome.details["status"] == "UNSAT":
        assert "only refutes the cube" in outcome.feedback


def test_invalid_strategy_is_a_completed_failure(satlib, runner):
    evaluator = SATStrategyEvaluator(runner=runner)
    task = satlib[0]
    for action, message in [("solver: z3", "unknown solver"), ("assumptions: 1", "missing 'solver"),
                            ("solver: glucose4\nphases: 1 x", "literals must be"),
                            ("solver: glucose4\nassumptions: 999", "outside variables")]:
        outcome = evaluator.evaluate(evaluator.reset(task), action)
        assert outcome.completed and not outcome.success and message in outcome.feedback
    assert parse_strategy("solver: Cadical195 # fast\nconflict_budget: 10").conflict_budget == 10


@pytest.mark.parametrize("solver", ["cadical195", "glucose4"])
def test_hard_instance_is_stopped_at_the_deadline(runner, solver):
    num_vars, clauses = pigeonhole(13)
    task = Task("php-13", "sat", "generated", "", "", "branching",
                reference=StrategyReference(num_vars, clauses, "UNSAT", max_conflicts=10**9))
    evaluator = SATStrategyEvaluator(timeout_s=1.0, runner=runner)
    outcome = evaluator.evaluate(evaluator.reset(task), f"solver: {solver}")
    assert not outcome.completed and outcome.reason == "timeout"
    assert outcome.wall_time < 5
    # The runner recovers: the next job gets a fresh worker.
    easy = solving.SolveJob(solver, ((1, 2), (-1,)))
    assert runner.solve(easy, 5).status == "SAT"
    orphans = subprocess.run(["pgrep", "-f", "evaluators.sat._worker"], capture_output=True,
                             text=True).stdout.split()
    assert len(orphans) <= 1


def test_generated_reference_encodings_are_correct():
    evaluator = SATEncodingEvaluator()
    try:
        for task in encoding_tasks(generated_per_family=3):
            outcome = evaluator.evaluate(evaluator.reset(task),
                                         problems.reference_encoding(task.reference.problem))
            assert outcome.success and outcome.utility == 1.0, (task.task_id, outcome.feedback)
    finally:
        evaluator.close()


def test_flat_graph_is_recovered_and_colourable(benchdata):
    tasks = [t for t in encoding_tasks(benchdata / "satlib", generated_per_family=0)]
    assert len(tasks) >= 10
    graph = tasks[0].reference.problem
    assert graph.n == 30 and graph.k == 3 and len(graph.edges) == 60
    evaluator = SATEncodingEvaluator()
    try:
        assert evaluator.evaluate(evaluator.reset(tasks[0]),
                                  problems.reference_encoding(graph)).success
    finally:
        evaluator.close()


def test_satisfiable_but_wrong_colouring_encoding_fails_validation(benchdata):
    task = encoding_tasks(benchdata / "satlib", generated_per_family=0)[0]
    graph = task.reference.problem
    # Forgets the edge constraints: satisfiable, but the decoded colouring breaks edges.
    wrong = problems.reference_encoding(problems.GraphColoring(graph.n, graph.k, ()))
    cnf = dimacs.parse(wrong)
    forced = [[v] for v, name in cnf.names.items() if name.endswith("_1")]  # everyone colour 1
    wrong = wrong.replace(f"p cnf {cnf.num_vars} {len(cnf.clauses)}",
                          f"p cnf {cnf.num_vars} {len(cnf.clauses) + len(forced)}")
    wrong += "".join(f"{c[0]} 0\n" for c in forced)
    evaluator = SATEncodingEvaluator()
    try:
        outcome = evaluator.evaluate(evaluator.reset(task), wrong)
    finally:
        evaluator.close()
    assert outcome.completed and not outcome.success
    assert outcome.details["status"] == "SAT"
    assert 0 < outcome.utility < 1 and "joins two vertices of colour 1" in outcome.feedback


def test_unsat_or_malformed_encodings_fail_cleanly():
    task = encoding_tasks(generated_per_family=1)[0]
    evaluator = SATEncodingEvaluator()
    try:
        unsat = evaluator.evaluate(evaluator.reset(task), "c var 1 x_1_1\np cnf 1 2\n1 0\n-1 0\n")
        assert unsat.completed and not unsat.success and "unsatisfiable" in unsat.feedback
        bad = evaluator.evaluate(evaluator.reset(task), "p cnf 2 1\n1 -3 0\n")
        assert bad.completed and not bad.success and "exceeds the 2 declared" in bad.feedback
        no_map = evaluator.evaluate(evaluator.reset(task), "p cnf 1 1\n1 0\n")
        assert "no variable map" in no_map.feedback
    finally:
        evaluator.close()


def test_dimacs_parser_accepts_satlib_trailer():
    cnf = dimacs.parse("c hi\np cnf 3 2\n1 -2\n 3 0\n-1 0\n%\n0\n")
    assert cnf.clauses == ((1, -2, 3), (-1,)) and cnf.num_vars == 3
    with pytest.raises(dimacs.DimacsError, match="line 1: clause before"):
        dimacs.parse("1 2 0\n")
