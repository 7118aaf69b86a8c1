"""Persistent worker processes for checks that cannot be interrupted in-process (SAT solvers
without an interrupt, z3 bit-blasting): length-prefixed pickled frames over the worker's stdin and
stdout; a job past its deadline gets the worker killed and the next job starts a new one.
``WorkerPool`` runs up to N such workers so that concurrent checks run in parallel."""
import os
import pickle
import queue
import select
import shutil
import struct
import subprocess
import sys
import threading
from typing import Callable

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read_exact(stream, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _send(stream, obj) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(payload)) + payload)
    stream.flush()


def _recv(stream):
    (size,) = struct.unpack("<Q", _read_exact(stream, 8))
    return pickle.loads(_read_exact(stream, size))


def worker_main(run: Callable) -> None:
    """Entry point of a worker process (``python -m evaluators.sat._worker`` or
    ``evaluators.smt._worker``): ``run(job)`` for each job read from stdin, results written to
    stdout, until stdin closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames may reach the parent's pipe
    while True:
        try:
            job = _recv(stdin)
        except EOFError:
            return
        try:
            _send(stdout, ("ok", run(job)))
        except Exception as err:  # reported to the parent as a crash of the check
            _send(stdout, ("error", f"{type(err).__name__}: {err}"))


class WorkerProcess:
    """A persistent interpreter running ``python -m <module>`` (a ``worker_main`` loop), started
    on first use, optionally under an address-space cap (``prlimit``, so no Python runs between
    fork and exec); a call that passes its deadline kills it and the next call starts a new one."""

    def __init__(self, module: str, memory_bytes: int | None = None):
        self.module = module
        self.memory_bytes = memory_bytes
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _ensure_worker(self):
        if self._proc is None or self._proc.poll() is not None:
            prefix = [shutil.which("prlimit") or "/usr/bin/prlimit", f"--as={self.memory_bytes}",
                      "--"] if self.memory_bytes else []
            self._proc = subprocess.Popen(prefix + [sys.executable, "-m", self.module],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          cwd=_PACKAGE_ROOT, start_new_session=True)

    def _kill_worker(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
            for stream in (self._proc.stdin, self._proc.stdout):
                stream.close()
        self._proc = None

    def call(self, job, timeout_s: float, label: str):
        """The worker's result for ``job``; TimeoutError past ``timeout_s`` (the worker is then
        killed), RuntimeError if it died or raised."""
        with self._lock:
            self._ensure_worker()
            try:
                _send(self._proc.stdin, job)
            except BrokenPipeError:
                self._kill_worker()
                raise RuntimeError(f"{label} worker died") from None
            ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
            if not ready:
                self._kill_worker()
                raise TimeoutError(f"{label} killed after {timeout_s:.1f}s")
            try:
                kind, payload = _recv(self._proc.stdout)
            except EOFError:
                self._kill_worker()
                raise RuntimeError(f"{label} worker died") from None
        if kind == "error":
            raise RuntimeError(payload)
        return payload

    @property
    def pid(self) -> int | None:
        """The running worker's process id (None before the first call and after a kill)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def close(self):
        with self._lock:
            self._kill_worker()


def default_pool_size() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class WorkerPool:
    """Up to ``size`` ``WorkerProcess``es of one module (default: one per CPU), each started on
    first use: a call takes an idle worker (the most recently used, still warm, first) or waits
    for one, so up to ``size`` calls run in parallel. A worker killed at its deadline is replaced
    by a fresh process on its next call; the pool keeps its size."""

    def __init__(self, module: str, size: int | None = None, memory_bytes: int | None = None):
        self.size = size or default_pool_size()
        if self.size < 1:
            raise ValueError(f"a worker pool needs at least one worker, not {self.size}")
        self.workers = [WorkerProcess(module, memory_bytes) for _ in range(self.size)]
        self._idle: queue.LifoQueue[WorkerProcess] = queue.LifoQueue()
        for worker in reversed(self.workers):
            self._idle.put(worker)

    def call(self, job, timeout_s: float, label: str):
        """As ``WorkerProcess.call``, on whichever worker is idle."""
        worker = self._idle.get()
        try:
            return worker.call(job, timeout_s, label)
        finally:
            self._idle.put(worker)

    def close(self):
        for worker in self.workers:
            worker.close()
