"""What a phase's tasks in flight run on (docs/concurrency.md, docs/speed.md): ``run`` their
event loop, ``run_bounded`` at most so many tasks at once, ``CheckerPool`` bounded threads for
the world model's blocking checks (paper §3.2)."""
import asyncio
import contextvars
import functools
import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Awaitable, Callable, Sequence, TypeVar

from evaluators.worker import default_pool_size

T = TypeVar("T")

YOUNG_THRESHOLD = 7000  # allocations between young collections while a phase runs (default 700)
_gc = {"lock": threading.Lock(), "depth": 0, "saved": ()}  # phases may run in threads at once


def run(coro: Awaitable[T]) -> T:
    """``asyncio.run(coro)`` with the objects alive now frozen out of garbage collection and the
    young threshold raised (tasks in flight make many short-lived objects; docs/speed.md), until
    the last phase running in this process returns."""
    with _gc["lock"]:
        _gc["depth"] += 1
        if _gc["depth"] == 1:
            _gc["saved"] = saved = gc.get_threshold()
            gc.freeze()  # no collection first (0.1-0.2 s); garbage frozen is freed at unfreeze
            gc.set_threshold(max(saved[0], YOUNG_THRESHOLD), *saved[1:])
    try:
        return asyncio.run(coro)
    finally:
        with _gc["lock"]:
            _gc["depth"] -= 1
            if _gc["depth"] == 0:
                gc.set_threshold(*_gc["saved"])
                gc.unfreeze()


async def run_bounded(jobs: Sequence[Callable[[], Awaitable[T]]], limit: int,
                      on_done: Callable[[int, T], None] = lambda index, result: None) -> list[T]:
    """Runs ``job()`` for every job, in order, at most ``limit`` in flight; returns the results
    in job order; ``on_done(index, result)`` as each finishes. The first failure cancels the
    others and is raised."""
    if limit < 1:
        raise ValueError(f"at most {limit} tasks in flight: needs at least one")
    results: list = [None] * len(jobs)
    queue = iter(range(len(jobs)))  # shared: each job goes to exactly one worker, in order

    async def worker():
        for i in queue:
            results[i] = await asyncio.create_task(jobs[i]())  # in a context of its own
            on_done(i, results[i])

    workers = [asyncio.create_task(worker()) for _ in range(min(limit, len(jobs)))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    return results


class CheckerPool(ThreadPoolExecutor):
    """``size`` threads (default: one per usable CPU) for blocking checks, one pool per phase."""

    def __init__(self, size: int | None = None):
        self.size = default_pool_size() if size is None else int(size)
        if self.size < 1:
            raise ValueError(f"checker pool size {size}: needs at least one thread")
        super().__init__(self.size, thread_name_prefix="checker")

    async def run(self, fn: Callable[..., T], *args) -> T:
        """``fn(*args)`` on a pool thread in the caller's context variables, awaited."""
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self, call)
