"""Running python-sat solvers under a hard time limit.

Solvers of the MiniSat family can be interrupted in-process (``solve_limited`` plus a timer that
calls ``interrupt``): that path costs almost nothing. CaDiCaL, Kissat, Lingeling and the rest
cannot be interrupted, so they run in a persistent worker process that is killed and replaced when
a job passes its deadline.
"""
import dataclasses
import os
import pickle
import select
import struct
import subprocess
import sys
import threading

from pysat.solvers import Solver

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INTERRUPTIBLE = frozenset({"minisat22", "minisatgh", "glucose3", "glucose4", "glucose42",
                           "maplechrono", "maplecm", "maplesat", "mergesat3"})
KNOWN = INTERRUPTIBLE | {"cadical103", "cadical153", "cadical195", "lingeling", "kissat404",
                         "minicard", "gluecard3", "gluecard4"}


@dataclasses.dataclass(frozen=True)
class SolveJob:
    solver: str
    clauses: tuple
    assumptions: tuple = ()
    phases: tuple = ()
    conflict_budget: int | None = None


@dataclasses.dataclass(frozen=True)
class SolveResult:
    status: str            # "SAT" | "UNSAT" | "UNKNOWN"
    model: tuple = ()
    conflicts: int = 0
    interrupted: bool = False  # stopped by the deadline rather than by the conflict budget


def _run(job: SolveJob, interrupt_after: float | None = None) -> SolveResult:
    with Solver(name=job.solver, bootstrap_with=[list(c) for c in job.clauses]) as solver:
        if job.phases:
            solver.set_phases(list(job.phases))
        if job.conflict_budget:
            try:
                solver.conf_budget(int(job.conflict_budget))
            except NotImplementedError:
                pass
        timer, fired = None, threading.Event()

        def stop():
            fired.set()
            solver.interrupt()

        if interrupt_after is not None:
            timer = threading.Timer(interrupt_after, stop)
            timer.start()
        try:
            try:
                answer = solver.solve_limited(assumptions=list(job.assumptions),
                                              expect_interrupt=interrupt_after is not None)
            except NotImplementedError:  # e.g. Lingeling: no limits; the worker's deadline holds
                answer = solver.solve(assumptions=list(job.assumptions))
        finally:
            if timer:
                timer.cancel()
        try:
            stats = solver.accum_stats() or {}
        except NotImplementedError:
            stats = {}
        model = tuple(solver.get_model() or ()) if answer else ()
        status = "SAT" if answer else ("UNSAT" if answer is False else "UNKNOWN")
        return SolveResult(status, model, int(stats.get("conflicts", 0)),
                           interrupted=status == "UNKNOWN" and fired.is_set())


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


def worker_main() -> None:
    """Entry point of the worker process (``python -m evaluators.sat._worker``): solve jobs read
    from stdin, write results to stdout, until stdin closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames may reach the parent's pipe
    while True:
        try:
            job = _recv(stdin)
        except EOFError:
            return
        try:
            _send(stdout, ("ok", _run(job)))
        except Exception as err:  # reported to the parent as a crash of the check
            _send(stdout, ("error", f"{type(err).__name__}: {err}"))


class SolverRunner:
    """Runs jobs in-process when the solver is interruptible, else in a worker process.

    The worker is a separate interpreter started once (``python -m evaluators.sat._worker``) and
    reused; a job that passes its deadline gets the worker killed, and the next job starts a new
    one.
    """

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _ensure_worker(self):
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-m", "evaluators.sat._worker"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          cwd=_PACKAGE_ROOT, start_new_session=True)

    def _kill_worker(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
            for stream in (self._proc.stdin, self._proc.stdout):
                stream.close()
        self._proc = None

    def solve(self, job: SolveJob, timeout_s: float, isolate: bool | None = None) -> SolveResult:
        """Raises TimeoutError when the deadline passes, RuntimeError if the solver crashed."""
        if job.solver not in KNOWN:
            raise ValueError(f"unknown solver {job.solver!r}; choose one of {sorted(KNOWN)}")
        if isolate is None:
            isolate = job.solver not in INTERRUPTIBLE
        if not isolate:
            result = _run(job, interrupt_after=timeout_s)
            if result.interrupted:
                raise TimeoutError(f"{job.solver} interrupted after {timeout_s:.1f}s")
            return result
        with self._lock:
            self._ensure_worker()
            try:
                _send(self._proc.stdin, job)
            except BrokenPipeError:
                self._kill_worker()
                raise RuntimeError(f"{job.solver} worker died") from None
            ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
            if not ready:
                self._kill_worker()
                raise TimeoutError(f"{job.solver} killed after {timeout_s:.1f}s")
            try:
                kind, payload = _recv(self._proc.stdout)
            except EOFError:
                self._kill_worker()
                raise RuntimeError(f"{job.solver} worker died") from None
        if kind == "error":
            raise RuntimeError(payload)
        return payload

    def close(self):
        with self._lock:
            self._kill_worker()

