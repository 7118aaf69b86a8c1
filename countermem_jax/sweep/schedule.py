"""Runs the graph: a phase run starts when its dependencies have finished; a failed run blocks
its dependents (and only them); the rest of the sweep goes on.
"""
import dataclasses
import time
import traceback

from countermem_jax.sweep import execute, progress


@dataclasses.dataclass
class Outcome:
    """The result of ``run_graph``: each run's final state, why runs failed, and what the
    finished runs returned."""
    states: dict            # run name -> done | skipped | failed | blocked
    errors: dict            # run name -> one line: why it failed / which dependency failed
    infos: dict             # run name -> what execute() returned (host, seconds, ...)

    @property
    def ok(self) -> bool:
        """Every run is done or was already finished (the binary's exit status 0)."""
        return all(s in ("done", "skipped") for s in self.states.values())


def one_line(err: BaseException) -> str:
    """An exception as one line, ``Type: message`` with whitespace collapsed (failure report)."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


class LocalExecutor:
    """Every run in this process, in submission order (dependencies are submitted first)."""

    def __init__(self, urls_env: str, imports: tuple):
        self.urls_env, self.imports = urls_env, imports
        self.queue = []

    def submit(self, run) -> None:
        """Queues ``run``; it runs at the next ``wait``."""
        self.queue.append(run)

    def wait(self, timeout: float):
        """Runs the oldest queued run to its end in this process (no timeout applies) and
        returns it as ``[(name, info, error)]``; a failure is reported, not raised."""
        del timeout
        run = self.queue.pop(0)
        try:
            return [(run.name, execute.execute(run, self.urls_env, self.imports), None)]
        except Exception as err:  # reported as this run's failure; the sweep goes on
            traceback.print_exc()
            return [(run.name, None, one_line(err))]


def _start_state(run, echo) -> str:
    """``skipped`` for a run an earlier sweep finished whose outputs are whole, else
    ``waiting``; a finished run whose outputs changed since is named, with why, and redone."""
    if not run.marker.is_file():
        return "waiting"
    why = execute.not_whole(run)
    if why is None:
        return "skipped"
    echo(f"redo: {run.name}: finished before, but its outputs are not whole ({why})")
    return "waiting"


def run_graph(runs, executor, *, progress_every_s: float = 30.0, echo=print,
              precheck=None, hosted_cap: int = 0) -> Outcome:
    """Runs ``runs`` (dependencies first) on ``executor``; ``precheck(run)`` may name a reason
    not to start a run (a workdir made with another config) before anything runs. Runs on
    hosted APIs start only while their ``hosted_slots`` fit, with the running ones', in
    ``hosted_cap`` (the sweep's cluster-wide cap; 0: none)."""
    # A run finished by an earlier sweep is skipped; a precheck refusal fails it up front.
    states = {r.name: _start_state(r, echo) for r in runs}
    errors, infos = {}, {}
    for run in runs:
        reason = precheck(run) if precheck and states[run.name] == "waiting" else None
        if reason:
            states[run.name], errors[run.name] = "failed", reason
    tally = progress.LogTally(r.workdir for r in runs)
    by_name = {r.name: r for r in runs}

    def hosted_fits(run) -> bool:
        in_use = sum(by_name[n].hosted_slots for n, s in states.items() if s == "running")
        return not hosted_cap or in_use + run.hosted_slots <= hosted_cap
    started = last = time.time()
    # Each round: start every waiting run whose dependencies finished (block those with a
    # failed one), then collect what ended; stop when nothing is running.
    while True:
        for run in runs:
            if states[run.name] != "waiting":
                continue
            dep_states = [states[d] for d in run.deps]
            if any(s in ("failed", "blocked") for s in dep_states):
                states[run.name] = "blocked"
                bad = next(d for d in run.deps if states[d] in ("failed", "blocked"))
                errors[run.name] = f"not started: dependency {bad} did not finish"
            elif all(s in ("done", "skipped") for s in dep_states) and hosted_fits(run):
                states[run.name] = "running"
                executor.submit(run)
        if not any(s == "running" for s in states.values()):
            break
        for name, info, error in executor.wait(progress_every_s):
            states[name] = "failed" if error else "done"
            if error:
                errors[name] = error
                echo(f"run failed: {name}: {error}")
            else:
                infos[name] = info
        if time.time() - last >= progress_every_s:
            echo(progress.summary_line(states, tally.update(), started))
            last = time.time()
    echo(progress.summary_line(states, tally.update(), started))
    return Outcome(states, errors, infos)


def failure_report(outcome: Outcome) -> str:
    """One line per run that failed or was not started, with why."""
    lines = [f"  {outcome.states[n]}: {n}: {e}" for n, e in outcome.errors.items()]
    return "\n".join(lines)
