"""One bounded pool of tasks in flight for a whole phase (keeps a vLLM server busy): jobs start
in order, at most ``limit`` at once; the first failure cancels the others and is raised."""
import asyncio
from typing import Awaitable, Callable, Sequence, TypeVar

T = TypeVar("T")


async def run_bounded(jobs: Sequence[Callable[[], Awaitable[T]]], limit: int,
                      on_done: Callable[[int, T], None] | None = None) -> list[T]:
    """Runs ``job()`` for every job with at most ``limit`` in flight; returns the results in job
    order; ``on_done(index, result)`` is called as each job finishes (e.g. a progress bar)."""
    if limit < 1:
        raise ValueError(f"at most {limit} tasks in flight: needs at least one")
    results: list = [None] * len(jobs)
    queue = iter(range(len(jobs)))

    async def worker():
        for i in queue:  # the shared iterator hands each job to exactly one worker, in order
            results[i] = await asyncio.create_task(jobs[i]())
            if on_done is not None:
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
