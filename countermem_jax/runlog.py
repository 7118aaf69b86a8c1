"""The decision log: one JSON line per event, appended and flushed as it happens.

Every decision (task, phase, draft, retrieved records and exclusions, selector choice and
Q-values, revised action, outcome, costs), every counterfactual check and every task end is
written. A killed run reads its log back to skip finished tasks.

Durability: one writer per file in a process (every ``RunLog`` of a path shares it, so lines never
interleave) keeps the file open; each event is written and handed to the OS on the caller's
thread as it is logged, so lines are in order and a killed *process* loses nothing. What a crash
of the *machine* may lose depends on the event (``durability``):

- ``decision``, ``counterfactual``, ``transition`` (``UNSYNCED_EVENTS``): never fsynced on their
  own; they become durable with the next fsync of the file. Losing them loses only an unfinished
  task (redone on resume) or transitions a checkpoint has not counted yet (``sync`` runs before
  every checkpoint save).
- ``task_end`` of evaluation and selector training (``GROUP_COMMITTED``): group commit. The call
  returns at once; one syncer thread per file fsyncs in the background, and one fsync covers every
  line written before it, however many task ends arrived meanwhile (issue 14: no fsync on the event
  loop per task). A machine crash in that short window only makes resuming redo the task.
- everything else (phase and seed boundaries, validations, construction waves, a construction
  task's ``task_end`` and the events ``RunLog.write_all`` appends) is durable before the call
  returns: a store, checkpoint or memory file saved right after it (construction records the task
  as processed) must never be ahead of the log.

``RunLog.sync()`` is a barrier: it returns once every line written so far is durable. At
interpreter exit every log is synced (``atexit``; the syncer threads are daemons and never keep the
process alive). A process that ends with ``os._exit`` (a forked worker) must call ``sync`` itself.
"""
import atexit
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
# Events made durable shortly after the call returns, by the file's syncer thread (group commit),
# in these phases only; in others (construction) the same event is durable before it returns.
GROUP_COMMITTED = {"task_end": frozenset({"evaluation", "selector_training"})}


def durability(event: str, fields: dict) -> str:
    """How ``event`` is made durable: "flushed" (to the OS only), "group" (fsynced shortly
    after, by the syncer) or "now" (fsynced before the write returns); see the module docstring."""
    if event in UNSYNCED_EVENTS:
        return "flushed"
    if fields.get("phase") in GROUP_COMMITTED.get(event, ()):
        return "group"
    return "now"


def _line(event: str, fields: dict) -> str:
    return json.dumps({"event": event, **fields}, default=_default, ensure_ascii=False) + "\n"


class _Writer:
    """The one appender of a log file in this process, and its syncer thread; reopens the file
    if it was replaced.

    Writes are counted; ``_synced`` is how many of them an fsync covers. An fsync runs on (a
    duplicate of) the file descriptor outside the lock, so writers never wait for the disk, and
    covers every line written before it started; the syncer thread makes them for group-committed
    events, a barrier (``sync``, a "now" event) on its own thread unless one under way covers it.
    """

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.lock = threading.Condition()
        self._file = None
        self._identity = None
        self._written = self._synced = self._requested = 0
        self._fsyncs = 0           # fsyncs under way, and how many writes the latest covers
        self._covering = 0
        self._syncer = None
        self._error: BaseException | None = None   # an fsync that failed: raised to every caller

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
                if self._synced < self._written:   # what went to the old file stays durable
                    os.fsync(self._file.fileno())
                    self._synced = self._written
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

    def append(self, text: str, durability: str) -> None:
        """Writes and flushes ``text`` (one or more lines); "group" asks the syncer for an fsync,
        "now" returns once one covers it (see ``durability``)."""
        with self.lock:
            self._raise_error()
            f = self._open()
            f.write(text)
            f.flush()
            self._written += 1
            if durability == "group":
                self._request()
            elif durability == "now":
                self._sync_upto(self._written)

    def sync(self) -> None:
        """Returns once every line appended so far is fsynced (raises if an fsync failed)."""
        with self.lock:
            self._raise_error()
            self._sync_upto(self._written)

    def _request(self) -> None:
        """Asks the syncer for an fsync of everything written so far (lock held)."""
        self._requested = self._written
        if self._syncer is None:
            self._syncer = threading.Thread(target=self._sync_loop, daemon=True,
                                            name=f"runlog-syncer:{self.path}")
            self._syncer.start()
        self.lock.notify_all()

    def _sync_upto(self, target: int) -> None:
        """Returns (lock held) once an fsync covers the first ``target`` writes: waits for one
        under way that covers them, else makes one itself at once (covering every write made by
        then), so a barrier never waits for an older fsync that cannot cover it."""
        while self._synced < target:
            self._raise_error()
            if self._fsyncs and self._covering >= target:
                self.lock.wait()
                continue
            fd = os.dup(self._file.fileno())
            covered = self._written
            self._fsyncs += 1
            self._covering = max(self._covering, covered)
            self.lock.release()   # writers go on while the disk works
            error = None
            try:
                os.fsync(fd)
            except Exception as err:  # raised to every writer and barrier from now on
                error = err
            finally:
                os.close(fd)
                self.lock.acquire()
                self._fsyncs -= 1
                if error is None:
                    self._synced = max(self._synced, covered)
                else:
                    self._error = self._error or error
                self.lock.notify_all()
        self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise OSError(f"run log {self.path}: fsync failed ({self._error}); lines written "
                          "since the last successful fsync may not be durable") from self._error

    def _sync_loop(self) -> None:
        """The syncer: whenever lines were requested, an fsync covering all lines written so far."""
        with self.lock:
            while self._error is None:
                if self._requested <= self._synced:
                    self.lock.wait()
                    continue
                try:
                    self._sync_upto(self._requested)
                except Exception as err:  # kept and raised to every writer and barrier
                    self._error = self._error or err
                    self.lock.notify_all()


_WRITERS: dict[str, _Writer] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(path: pathlib.Path) -> _Writer:
    """The process-wide writer of ``path`` (created on first use, keyed by absolute path)."""
    with _WRITERS_LOCK:
        key = os.path.abspath(path)
        if key not in _WRITERS:
            _WRITERS[key] = _Writer(pathlib.Path(key))
            # at interpreter exit every line is made durable (each log on its own: one whose
            # fsync failed raises there without keeping the others from syncing)
            atexit.register(_WRITERS[key].sync)
        return _WRITERS[key]


def _forget_writers_in_child() -> None:
    """A forked child gets its own writers and syncers (a parent's lock may be held at the fork,
    and its syncer threads do not exist in the child)."""
    global _WRITERS_LOCK
    for writer in _WRITERS.values():
        atexit.unregister(writer.sync)
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
        """Appends ``{"event": event, **fields}`` as one line, flushed to the OS before it
        returns; when it is fsynced depends on the event (``durability``, module docstring).
        """
        _writer(self.path).append(_line(event, fields), durability(event, fields))

    def write_all(self, events: "EventBuffer") -> None:
        """Appends the buffered ``events`` in order, in one write, durable before it returns."""
        if events.lines:
            _writer(self.path).append("".join(events.lines), "now")

    def sync(self) -> None:
        """Returns once every event written so far is durable (e.g. before saving a checkpoint
        that counts the ``transition`` events just written)."""
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


class EventBuffer:
    """Events kept in memory and appended to a log in one write (``RunLog.write_all``): a
    construction run until it commits, a selector-training episode. Serialised as written, so
    later changes to the objects logged do not leak in."""

    def __init__(self):
        self.lines: list[str] = []

    def write(self, event: str, **fields) -> None:
        """Keeps one event (the line ``RunLog.write`` would write)."""
        self.lines.append(_line(event, fields))
