"""Timing helpers shared by the benchmark scripts."""
import json
import statistics
import time
from typing import Callable


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
