"""A worker for tests/test_worker_pool.py (``python -m tests.pool_probe_worker``): sleeps for the
job's seconds and returns its pid with the [start, end] of the job on the system's monotonic clock."""
import os
import time

from evaluators import worker


def _probe(seconds: float):
    start = time.monotonic()
    time.sleep(seconds)
    return os.getpid(), start, time.monotonic()


if __name__ == "__main__":
    worker.worker_main(_probe)
