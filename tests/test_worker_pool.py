"""The pool of isolated worker processes (evaluators/worker.py) and the SAT runner on it."""
import concurrent.futures
import itertools
import os

import pytest

from evaluators.sat import solving
from evaluators.worker import WorkerPool, default_pool_size
from helpers import pigeonhole


def _parallel(fn, args):
    with concurrent.futures.ThreadPoolExecutor(len(args)) as ex:
        return list(ex.map(fn, args))


def test_concurrent_calls_run_on_different_workers_at_once():
    pool = WorkerPool("tests.pool_probe_worker", size=3)
    try:
        out = _parallel(lambda s: pool.call(s, 30, "probe"), [0.5] * 3)
        pids = {pid for pid, _, _ in out}
        assert len(pids) == 3 and pids == {w.pid for w in pool.workers}
        overlapping = [(a, b) for a, b in itertools.combinations(out, 2)
                       if a[1] < b[2] and b[1] < a[2]]
        assert overlapping  # at least two jobs' [start, end] intervals overlap
        # workers are reused, not restarted: a second round runs on the same processes
        assert {pid for pid, _, _ in _parallel(lambda s: pool.call(s, 30, "probe"),
                                               [0.2] * 3)} == pids
    finally:
        pool.close()
    assert all(w.pid is None for w in pool.workers)


def test_a_timed_out_worker_is_killed_and_replaced():
    pool = WorkerPool("tests.pool_probe_worker", size=2)
    try:
        first = {pid for pid, _, _ in _parallel(lambda s: pool.call(s, 30, "probe"), [0.3] * 2)}
        with pytest.raises(TimeoutError, match="probe killed"):
            pool.call(30.0, 0.5, "probe")
        killed = first - {w.pid for w in pool.workers}
        assert len(killed) == 1
        with pytest.raises(ProcessLookupError):
            os.kill(killed.pop(), 0)
        after = {pid for pid, _, _ in _parallel(lambda s: pool.call(s, 30, "probe"), [0.3] * 2)}
        assert len(after) == 2 and len(after & first) == 1 and len(pool.workers) == 2
    finally:
        pool.close()


def test_pool_size_defaults_to_the_cpus_and_must_be_positive():
    assert WorkerPool("tests.pool_probe_worker").size == default_pool_size() >= 1
    with pytest.raises(ValueError, match="at least one worker"):
        WorkerPool("tests.pool_probe_worker", size=-1)


def test_isolated_solvers_run_on_a_pool_with_the_same_results():
    jobs = [solving.SolveJob("cadical195", pigeonhole(7)[1]),
            solving.SolveJob("kissat404", pigeonhole(7)[1]),
            solving.SolveJob("cadical195", ((1, 2), (-1,), (3, -2)))]
    sequential = solving.SolverRunner(workers=1)
    pooled = solving.SolverRunner(workers=3)
    try:
        alone = [sequential.solve(job, 60) for job in jobs]
        together = _parallel(lambda job: pooled.solve(job, 60), jobs)
        assert together == alone and [r.status for r in alone] == ["UNSAT", "UNSAT", "SAT"]
        assert len({w.pid for w in pooled._worker.workers} - {None}) == 3
    finally:
        sequential.close()
        pooled.close()


def test_smt_encodings_are_checked_on_a_pool_with_the_same_outcomes():
    from evaluators.smt import SMTEncodingEvaluator, encoding_tasks, problems
    tasks = encoding_tasks(per_family=1)[:3]
    alone, pooled = SMTEncodingEvaluator(workers=1), SMTEncodingEvaluator(workers=3)

    def check(evaluator, task):
        outcome = evaluator.evaluate(evaluator.reset(task),
                                     problems.reference_script(task.reference.problem))
        return outcome.success, outcome.utility, outcome.feedback, dict(outcome.details)
    try:
        expected = [check(alone, task) for task in tasks]
        assert _parallel(lambda task: check(pooled, task), tasks) == expected
        assert all(row[0] for row in expected)
        assert len({w.pid for w in pooled._worker.workers} - {None}) >= 2
    finally:
        alone.close()
        pooled.close()
