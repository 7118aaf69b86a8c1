"""The phase's bounded pools: tasks in flight (task_pool.py) and checker threads (checker_pool.py)."""
import asyncio
import contextvars
import threading
import time

import pytest

from countermem_jax.checker_pool import CheckerPool
from evaluators.worker import default_pool_size
from countermem_jax.task_pool import run_bounded


def test_the_pool_keeps_at_most_limit_jobs_in_flight_and_returns_results_in_job_order():
    state = {"now": 0, "peak": 0, "started": []}

    def job(i):
        async def run():
            state["started"].append(i)
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            await asyncio.sleep(0.01 * ((7 * i) % 5))  # finish out of order
            state["now"] -= 1
            return i * i
        return run
    done = []
    results = asyncio.run(run_bounded([job(i) for i in range(30)], 8,
                                      on_done=lambda i, r: done.append(i)))
    assert results == [i * i for i in range(30)]
    assert state["peak"] == 8 and state["started"][:8] == list(range(8))
    assert sorted(done) == list(range(30)) and done != list(range(30))
    with pytest.raises(ValueError, match="at least one"):
        asyncio.run(run_bounded([job(0)], 0))


def test_a_failed_job_cancels_the_jobs_in_flight_and_is_raised():
    cancelled = []

    def job(i):
        async def run():
            if i == 3:
                raise RuntimeError("job 3 failed")
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                cancelled.append(i)
                raise
        return run
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="job 3 failed"):
        asyncio.run(run_bounded([job(i) for i in range(10)], 4))
    assert time.perf_counter() - start < 2 and sorted(cancelled) == [0, 1, 2]


def test_checks_run_on_at_most_size_threads_and_see_the_callers_context():
    var = contextvars.ContextVar("var", default="unset")
    lock = threading.Lock()
    seen = {"now": 0, "peak": 0}

    def check(i):
        with lock:
            seen["now"] += 1
            seen["peak"] = max(seen["peak"], seen["now"])
        time.sleep(0.05)
        with lock:
            seen["now"] -= 1
        return i, var.get(), threading.current_thread().name

    async def run(pool):
        async def one(i):
            var.set(f"task{i}")
            return await pool.run(check, i)
        return await asyncio.gather(*[one(i) for i in range(12)])
    with CheckerPool(3) as pool:
        out = asyncio.run(run(pool))
    assert [o[:2] for o in out] == [(i, f"task{i}") for i in range(12)]
    assert seen["peak"] == 3 == pool.peak_running and pool.checks == 12 and pool.running == 0
    assert len({o[2] for o in out}) == 3 and all(o[2].startswith("checker") for o in out)
    assert CheckerPool().size == default_pool_size() >= 1
    with pytest.raises(ValueError, match="at least one thread"):
        CheckerPool(0)
