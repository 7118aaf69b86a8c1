"""Running python-sat solvers under a hard time limit."""
import dataclasses
import threading

from pysat.solvers import Solver

from evaluators.worker import WorkerPool

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


class SolverRunner:
    """Runs jobs in-process when the solver is interruptible, else in a worker process.

    Workers are separate interpreters (``python -m evaluators.sat._worker``) in a pool of
    ``workers`` (default: one per CPU), each started on first use and reused; a job that passes
    its deadline gets its worker killed, and that worker's next job starts a new one.
    """

    def __init__(self, workers: int | None = None):
        self._worker = WorkerPool("evaluators.sat._worker", size=workers)

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
        return self._worker.call(job, timeout_s, job.solver)

    def close(self):
        self._worker.close()
