"""A bounded pool of threads for checker calls made from async code (paper §3.2: every action
and counterfactual is checked by the world model; checkers run on an executor sized
for the machine).

Agents await ``CheckerPool.run(evaluator.evaluate, state, action)``; at most ``size`` checks run
at once, the rest wait their turn, so that 64 decisions in flight cannot start 64 SQLite queries or
solver jobs on a 2-core machine (asyncio's default executor would take min(32, cpus + 4)). The
phase creates one pool and hands it to every agent it builds; solvers that must be isolated sit
behind their own pool of worker processes (``evaluators/worker.py``), called from these threads.
The caller's context variables are visible inside the check (as with ``asyncio.to_thread``).
"""
import asyncio
import contextvars
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from evaluators.worker import default_pool_size

T = TypeVar("T")


class CheckerPool:
    """``size`` threads (default: one per CPU this process may use) for blocking checks; counts
    the checks running now and at most."""

    def __init__(self, size: int | None = None):
        self.size = default_pool_size() if size is None else int(size)
        if self.size < 1:
            raise ValueError(f"checker pool size {size}: needs at least one thread")
        self._executor = ThreadPoolExecutor(self.size, thread_name_prefix="checker")
        self._lock = threading.Lock()
        self.running = 0
        self.peak_running = 0
        self.checks = 0

    def _counted(self, fn: Callable[..., T], *args) -> T:
        with self._lock:
            self.running += 1
            self.checks += 1
            self.peak_running = max(self.peak_running, self.running)
        try:
            return fn(*args)
        finally:
            with self._lock:
                self.running -= 1

    async def run(self, fn: Callable[..., T], *args) -> T:
        """``fn(*args)`` on one of the pool's threads, awaited without blocking the loop."""
        call = functools.partial(contextvars.copy_context().run, self._counted, fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        """Waits for running checks and stops the threads (a closed pool takes no new check)."""
        self._executor.shutdown(wait=True)

    def __enter__(self) -> "CheckerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
