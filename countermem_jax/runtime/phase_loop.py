"""The event loop a phase's tasks in flight run on (the framework's own overhead).

``run(coro)`` is ``asyncio.run`` with Python's cyclic garbage collector kept off the objects
that were alive when the loop started: the tasks, the store, the retrieval index, JAX's and the
libraries' state. Many tasks in flight allocate many short-lived objects (requests, replies,
futures, log lines), so the collector runs often, and every full collection walked all of those
long-lived objects too: measured at 64 evaluation tasks in flight on the pipeline benchmark
(``perf/pipeline.py``), about 0.55 s of a 5 s phase, 0.27 s with them frozen (``gc.freeze``).
Objects created during the loop are collected as before; the frozen ones (garbage among them
included) are handed back to the collector (``gc.unfreeze``) when the outermost ``run`` returns. The
threshold of the youngest generation is raised while the loop runs (fewer, equally cheap young
collections) and restored after.
"""
import asyncio
import contextlib
import gc
import threading
from typing import Awaitable, TypeVar

T = TypeVar("T")

YOUNG_THRESHOLD = 7000  # allocations between young collections while a phase runs (default 700)

_lock = threading.Lock()
_depth = 0  # phases running in this process (a study or sweep may nest or thread them)
_saved_threshold: tuple = ()  # the collector's thresholds before the outermost block


@contextlib.contextmanager
def long_lived_objects_frozen():
    """Freezes the objects alive now out of cyclic collection, and raises the young threshold,
    until the outermost such block exits."""
    global _depth, _saved_threshold
    with _lock:
        _depth += 1
        if _depth == 1:
            _saved_threshold = gc.get_threshold()
            gc.freeze()  # no collection first: a full one costs 0.1-0.2 s here, and the few
            # cycles already garbage are only kept until ``gc.unfreeze`` hands them back
            gc.set_threshold(max(_saved_threshold[0], YOUNG_THRESHOLD), *_saved_threshold[1:])
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved_threshold)
                gc.unfreeze()


def run(coro: Awaitable[T]) -> T:
    """``asyncio.run(coro)`` with the long-lived objects frozen out of garbage collection."""
    with long_lived_objects_frozen():
        return asyncio.run(coro)
