"""The event loop a phase's tasks in flight run on: ``asyncio.run`` with the objects alive at its
start frozen out of cyclic garbage collection and fewer young collections, since many tasks in
flight allocate many short-lived objects (docs/speed.md)."""
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
    """Freezes the objects alive now and raises the young threshold until the outermost such
    block exits (phases may nest or run in threads)."""
    global _depth, _saved_threshold
    with _lock:
        _depth += 1
        if _depth == 1:
            _saved_threshold = gc.get_threshold()
            gc.freeze()  # no collection first (0.1-0.2 s); garbage frozen is freed at unfreeze
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
