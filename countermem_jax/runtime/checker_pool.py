"""Bounded threads for the world model's checks made from async code (paper §3.2): 64 decisions
in flight cannot start 64 SQLite queries or solver jobs on 2 cores; a phase hands one pool to
every agent. Isolated solvers sit behind their own worker processes (``evaluators/worker.py``).
"""
import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from evaluators.worker import default_pool_size

T = TypeVar("T")


class CheckerPool(ThreadPoolExecutor):
    """``size`` threads (default: one per CPU this process may use) for blocking checks; a
    closed pool (``close`` or the end of a ``with`` block) waits for its running checks."""

    def __init__(self, size: int | None = None):
        self.size = default_pool_size() if size is None else int(size)
        if self.size < 1:
            raise ValueError(f"checker pool size {size}: needs at least one thread")
        super().__init__(self.size, thread_name_prefix="checker")

    async def run(self, fn: Callable[..., T], *args) -> T:
        """``fn(*args)`` on one of the pool's threads, in the caller's context variables (as
        ``asyncio.to_thread``), awaited without blocking the loop."""
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self, call)

    def close(self) -> None:
        """Waits for running checks and stops the threads."""
        self.shutdown(wait=True)
