"""Timing and optional-dependency helpers shared by the speed scripts.

Speed goals are checked as ratios against a baseline timed in the same process and run, never
as absolute times in tests: the machines differ too much for a fixed number to mean anything.
``best_time`` suits micro-benchmarks (the minimum filters out scheduler noise), ``median_time``
suits operations with real I/O (sandboxes, subprocesses), whose typical cost is what matters.
"""
import importlib
import json
import statistics
import time
from types import ModuleType
from typing import Callable, Optional


def best_time(fn: Callable[[], object], repeats: int = 5, number: int = 1) -> float:
    """Best wall time of ``number`` calls, over ``repeats`` tries, in seconds per call."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def print_result(result: dict) -> None:
    """Prints the machine-readable last line ``result: {json}`` (sorted keys) that tools and
    docs/speed.md read.
    """
    print("result: " + json.dumps(result, sort_keys=True))


def median_time(fn: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls after one warm-up call, in seconds."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def optional_module(name: str, extra: str, what: str) -> Optional[ModuleType]:
    """``name`` imported, or None after printing which extra enables ``what`` (a comparison that
    needs an optional dependency is skipped; the script's other figures are still printed)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        print(f"note: {name} is not installed, skipping {what} "
              f'(install the {extra} extra to run it: pip install -e ".[{extra}]")')
        return None
