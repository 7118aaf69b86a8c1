"""The run log: one JSON line per event, appended as it happens; the source of every reported
figure and what a killed run resumes from. Each event reaches the OS at once (a killed process
loses nothing); ``sync`` fsyncs where a file saved next must not be ahead of the log, and at exit.
"""
import atexit
import collections
import json
import os
import pathlib
import re
import threading

import numpy as np


def _default(obj):
    """JSON for numpy arrays and numbers, and sets; anything else fails at the write."""
    if isinstance(obj, (np.ndarray, np.generic, set, frozenset)):  # tuples are arrays already
        return obj.tolist() if isinstance(obj, (np.ndarray, np.generic)) else list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# A lone surrogate has no UTF-8 form: written as U+FFFD, the log stays UTF-8 (issue 39).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _line(event: str, fields: dict) -> str:
    text = json.dumps({"event": event, **fields}, default=_default, ensure_ascii=False)
    return _SURROGATE.sub("\ufffd", text) + "\n"


class _Writer:
    """The one appender of a log file in this process; reopens the file if it was replaced."""

    def __init__(self, path: pathlib.Path):
        self.path, self.lock = path, threading.Lock()
        self._file, self._identity, self._dirty = None, None, False
        self._error: BaseException | None = None   # an fsync that failed: raised from then on

    def _open(self):
        """The open handle, reopened when the path names another file or none (rotated)."""
        try:
            stat = os.stat(self.path)
            current = (stat.st_dev, stat.st_ino)
        except FileNotFoundError:
            current = None
        if self._file is None or current != self._identity:
            if self._file is not None:
                self._fsync()   # what went to the old file stays durable
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

    def append(self, text: str, sync: bool = False) -> None:
        """Writes and flushes ``text``; with ``sync``, fsyncs before return."""
        with self.lock:
            self._raise_error()
            f = self._open()
            f.write(text)
            f.flush()
            self._dirty = True
            if sync:
                self._fsync()

    def sync(self) -> None:
        """Returns once every line appended so far is fsynced (raises if an fsync failed)."""
        with self.lock:
            self._raise_error()
            self._fsync()

    def _fsync(self) -> None:
        if self._dirty and self._file is not None:
            try:
                os.fsync(self._file.fileno())
            except OSError as err:
                self._error = err
                self._raise_error()
            self._dirty = False

    def _raise_error(self) -> None:
        if self._error is not None:
            raise OSError(f"run log {self.path}: fsync failed ({self._error}); lines written "
                          "since the last successful fsync may not be durable") from self._error


_WRITERS: dict[str, _Writer] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(path: pathlib.Path) -> _Writer:
    """The process-wide writer of ``path`` (created on first use, keyed by absolute path)."""
    with _WRITERS_LOCK:
        key = os.path.abspath(path)
        if key not in _WRITERS:
            _WRITERS[key] = _Writer(pathlib.Path(key))
            atexit.register(_WRITERS[key].sync)   # every line durable at interpreter exit
        return _WRITERS[key]


def _forget_writers_in_child() -> None:
    """A forked child (worker pools fork) gets its own writers: a parent's lock may be held."""
    global _WRITERS_LOCK
    for writer in _WRITERS.values():
        atexit.unregister(writer.sync)
    _WRITERS.clear()
    _WRITERS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_writers_in_child)


class RunLog:
    """Append-only JSON Lines log; every ``RunLog`` of a path appends through one writer."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: str, **fields) -> None:
        """Appends ``{"event": event, **fields}`` as one line, handed to the OS at once."""
        _writer(self.path).append(_line(event, fields))

    def write_all(self, events: "EventBuffer") -> None:
        """Appends the buffered ``events`` in order, in one write, durable before it returns."""
        if events.lines:
            _writer(self.path).append("".join(events.lines), sync=True)

    def sync(self) -> None:
        """Returns once every event written so far is durable (fsynced)."""
        _writer(self.path).sync()

    def events(self, event: str | None = None) -> list[dict]:
        """All events in file order, or only those named ``event``; [] before the log exists."""
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
        """Decisions of the finished tasks of ``run``, from their last (complete) attempt."""
        pending, done = collections.defaultdict(list), {}
        for e in self.events():
            if e.get("run") == run and e.get("event") == "decision":
                if e.get("decision") == 0:   # a new attempt: a killed one's decisions dropped
                    pending[e["task_id"]] = []
                pending[e["task_id"]].append(e)
            elif e.get("run") == run and e.get("event") == "task_end":
                done[e["task_id"]] = pending.pop(e["task_id"], [])
        return [d for decisions in done.values() for d in decisions]


class EventBuffer:
    """Events kept in memory, appended to a log in one write (``RunLog.write_all``)."""

    def __init__(self):
        self.lines: list[str] = []

    def write(self, event: str, **fields) -> None:
        """Keeps one event (the line ``RunLog.write`` would write)."""
        self.lines.append(_line(event, fields))
