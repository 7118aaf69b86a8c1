"""The decision log: one JSON line per event, appended and flushed as it happens.

Every decision (task, phase, draft, retrieved records and exclusions, selector choice and
Q-values, revised action, outcome, costs), every counterfactual check and every task end is
written. A killed run reads its log back to skip finished tasks.

Durability: one writer per file in a process (every ``RunLog`` of a path shares it, so lines never
interleave) keeps the file open; each event is handed to the OS as it is written (a killed process
loses nothing), and events that close a unit of work (``task_end``, phase and seed boundaries,
validations) are also fsynced, with everything before them, so that a crash of the machine loses
at most the events of unfinished tasks, which resuming redoes anyway. The per-decision events
(``decision``, ``counterfactual``, ``transition``) are not fsynced one by one: on the hot path
that cost milliseconds each.
"""
import json
import os
import pathlib
import threading


import numpy as np


def _default(obj):
    """JSON fallback for values the events carry: numpy arrays and scalars, sets and tuples.

    Anything else is a ``TypeError``: an event that cannot be written faithfully should fail
    loudly at the write, not turn into a string nobody can read back.
    """
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# High-rate events written while a task is under way; losing them in a machine crash
# only loses an unfinished task, which resuming redoes.
UNSYNCED_EVENTS = frozenset({"decision", "counterfactual", "transition"})


class _Writer:
    """The one appender of a log file in this process; reopens the file if it was replaced."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.lock = threading.Lock()
        self._file = None
        self._identity = None

    def _open(self):
        """The open handle, reopened when the path now names a different file (or none).

        Comparing (device, inode) catches a log that was rotated or deleted under a running
        process; appending to the old handle would write into a file no one will read.
        """
        try:
            stat = os.stat(self.path)
            current = (stat.st_dev, stat.st_ino)
        except FileNotFoundError:
            current = None
        if self._file is None or current != self._identity:
            if self._file is not None:
                self._file.close()
            self._file = open(self.path, "a", encoding="utf-8")
            stat = os.fstat(self._file.fileno())
            self._identity = (stat.st_dev, stat.st_ino)
            if current is None:  # a new file: make its directory entry durable too
                directory = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
        return self._file

    def append(self, line: str, durable: bool) -> None:
        """Writes one line; ``durable`` also fsyncs it (and everything before it)."""
        with self.lock:
            f = self._open()
            f.write(line)
            f.flush()
            if durable:
                os.fsync(f.fileno())

    def sync(self) -> None:
        """fsyncs everything appended so far."""
        with self.lock:
            os.fsync(self._open().fileno())


_WRITERS: dict[str, _Writer] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(path: pathlib.Path) -> _Writer:
    """The process-wide writer of ``path`` (created on first use, keyed by absolute path)."""
    with _WRITERS_LOCK:
        key = os.path.abspath(path)
        if key not in _WRITERS:
            _WRITERS[key] = _Writer(pathlib.Path(key))
        return _WRITERS[key]


def _forget_writers_in_child() -> None:
    """A forked child gets its own writers (a parent's lock may be held at the fork)."""
    global _WRITERS_LOCK
    _WRITERS.clear()
    _WRITERS_LOCK = threading.Lock()


# Worker pools fork: without this a child could inherit a lock held by a parent thread.
os.register_at_fork(after_in_child=_forget_writers_in_child)


class RunLog:
    """Append-only JSON Lines log of one workdir's events; cheap to create, safe to share.

    Several ``RunLog`` objects on the same path (phases, concurrent tasks in threads) append
    through one writer, so lines never interleave. Reading skips a last line cut by a crash.
    The log is the single source of every reported figure (``metrics``), and resuming a run
    reads it to skip tasks already finished.
    """
    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: str, **fields) -> None:
        """Appends ``{"event": event, **fields}`` as one line.

        Unit-closing events are fsynced; the per-decision ones in ``UNSYNCED_EVENTS`` are only
        flushed to the OS (see the module docstring for why).
        """
        line = json.dumps({"event": event, **fields}, default=_default, ensure_ascii=False)
        _writer(self.path).append(line + "\n", durable=event not in UNSYNCED_EVENTS)

    def sync(self) -> None:
        """Makes every event written so far durable (e.g. before saving a checkpoint that
        counts the ``transition`` events just written)."""
        _writer(self.path).sync()

    def events(self, event: str | None = None) -> list[dict]:
        """All events in file order, or only those named ``event``; [] when the log does not exist
        yet.
        """
        if not self.path.exists():
            return []
        out = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash; its task is redone
                if event is None or obj.get("event") == event:
                    out.append(obj)
        return out

    def finished(self, run: str) -> set[str]:
        """Ids of the tasks of ``run`` that logged a ``task_end`` (what resuming skips)."""
        return {e["task_id"] for e in self.events("task_end") if e.get("run") == run}

    def completed_decisions(self, run: str) -> list[dict]:
        """Decisions of the tasks of ``run`` that finished, from their last (complete) attempt:
        decisions left by a run killed mid-task, and redone after resuming, are not counted twice."""
        pending: dict[str, list[dict]] = {}
        done: dict[str, list[dict]] = {}
        for e in self.events():
            if e.get("run") != run or e.get("event") not in ("decision", "task_end"):
                continue
            tid = e["task_id"]
            if e["event"] == "decision":
                # Decision 0 starts an attempt: anything pending from a killed attempt is dropped.
                if e.get("decision") == 0:
                    pending[tid] = []
                pending.setdefault(tid, []).append(e)
            else:
                done[tid] = pending.pop(tid, [])
        return [d for decisions in done.values() for d in decisions]


class HeldEvents:
    """The events of a unit of work that may still be discarded, held back from ``target``:
    a construction task run speculatively in a wave (``countermem_jax.construction_waves``)
    writes here; ``commit`` appends its events to the log in one write, fsynced, when the task
    commits, and a discarded run's events are simply dropped, so nothing that reads the log
    (resume, metrics, the cost of building) ever sees them. Serialised as they are written, so
    later changes to the objects logged do not leak in."""

    def __init__(self, target: RunLog):
        self.target = target
        self.path = target.path
        self._lines: list[str] = []
        # what else the unit of work held back (its parse failures): released with its events
        self.on_commit: list = []

    def write(self, event: str, **fields) -> None:
        """Holds one event (the line ``RunLog.write`` would write)."""
        self._lines.append(json.dumps({"event": event, **fields}, default=_default,
                                      ensure_ascii=False) + "\n")

    def commit(self) -> None:
        """Appends the held events to the log, in order, and fsyncs them; holds nothing after."""
        if self._lines:
            _writer(self.target.path).append("".join(self._lines), durable=True)
        self._lines = []
        for release in self.on_commit:
            release()
        self.on_commit = []
