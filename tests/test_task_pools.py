"""The phase's bounded pools: tasks in flight and checker threads (runtime/inflight.py)."""
import asyncio
import contextvars
import threading
import time

import pytest

from countermem_jax.runtime.inflight import CheckerPool
from countermem_jax.runtime.inflight import run_bounded
from evaluators.worker import default_pool_size
from helpers import agent_config
from test_pipeline import people_benchmark  # noqa: F401 (fixture)


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
    assert seen["peak"] == 3 and seen["now"] == 0
    assert len({o[2] for o in out}) == 3 and all(o[2].startswith("checker") for o in out)
    assert CheckerPool().size == default_pool_size() >= 1
    with pytest.raises(ValueError, match="at least one thread"):
        CheckerPool(0)


class _SlowChecker:
    """The real SQL checker, taking 50 ms longer per check; counts checks, and those running at
    once."""

    def __init__(self, inner):
        self.inner, self.lock, self.now, self.peak, self.calls = inner, threading.Lock(), 0, 0, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def evaluate(self, state, action):
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(0.05)
            return self.inner.evaluate(state, action)
        finally:
            with self.lock:
                self.now -= 1


def test_agents_of_a_phase_check_on_its_bounded_pool(people_benchmark):
    from countermem_jax.method.agents import Agent, Augmentation
    from test_pipeline import scripted
    tasks, evaluator, domain = people_benchmark
    checker = _SlowChecker(evaluator)
    with CheckerPool(2) as pool:
        agents = [Agent(scripted(), checker, domain, agent_config(max_attempts=2), checks=pool)
                  for _ in range(3)]

        async def run_all():
            return await asyncio.gather(*[a.run(t, Augmentation(), phase="evaluation", run="r")
                                          for a in agents for t in tasks])
        contexts = asyncio.run(run_all())
    assert checker.peak == 2  # 21 tasks in flight, 2 checks at a time
    assert checker.calls == sum(c.calls for c in contexts) >= len(contexts)
