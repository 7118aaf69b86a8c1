"""Persistent worker processes for checks that cannot be interrupted in-process (SAT solvers
without an interrupt, z3 bit-blasting): length-prefixed pickled frames over the worker's stdin and
stdout; a job past its deadline gets the worker killed and the next job starts a new one."""
import os
import pickle
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

    def close(self):
        with self._lock:
            self._kill_worker()
