"""The run log: one JSON line per event, appended as it happens; the source of every reported
figure and what a killed run resumes from. Each event reaches the OS at once (a killed process
loses nothing); ``sync`` fsyncs where a file saved next must not be ahead of the log, and at exit.
"""
import atexit
import contextlib
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


_lock = threading.Lock()   # every append and fsync of this process
_unsynced: set[str] = set()   # logs written since their last fsync
_failed: dict[str, OSError] = {}   # logs whose fsync failed: raised at every later call
# A forked child (worker pools fork) takes a new lock: a parent's thread may hold this one.
os.register_at_fork(after_in_child=lambda: globals().update(_lock=threading.Lock()))


def _fsync(path: str) -> None:
    """fsyncs the file or folder ``path`` (any descriptor will do); a removed one keeps nothing."""
    with contextlib.suppress(FileNotFoundError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _append(path, text: str, sync: bool) -> None:
    """Appends ``text`` to ``path`` (opened anew: a replaced file is followed); with ``sync``,
    fsyncs what went to it since. A failed fsync is raised then and at every later call."""
    path = os.path.abspath(path)
    with _lock:
        if text and path not in _failed:
            _unsynced.add(path)
            new = not os.path.exists(path)
            with open(path, "ab") as f:   # one append: every byte written before the close
                f.write(text.encode("utf-8"))
            if new:   # its directory entry made durable too
                _fsync(os.path.dirname(path))
        if sync and path in _unsynced:
            _unsynced.discard(path)
            try:
                _fsync(path)
            except OSError as err:
                _failed[path] = err
        if path in _failed:
            raise OSError(f"run log {path}: fsync failed ({_failed[path]})") from _failed[path]


@atexit.register
def _sync_all() -> None:
    """Every line durable at interpreter exit (each log tried; failures raised after)."""
    with contextlib.ExitStack() as stack:
        for path in list(_unsynced):
            stack.callback(_append, path, "", True)


class RunLog:
    """Append-only JSON Lines log; any number of ``RunLog`` objects may append to one path."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: str, **fields) -> None:
        """Appends ``{"event": event, **fields}`` as one line, handed to the OS at once."""
        _append(self.path, _line(event, fields), sync=False)

    def write_all(self, events: "EventBuffer") -> None:
        """Appends the buffered ``events`` in order, in one write, durable before it returns."""
        if events.lines:
            _append(self.path, "".join(events.lines), sync=True)

    def sync(self) -> None:
        """Returns once every event written so far is durable (fsynced)."""
        _append(self.path, "", sync=True)

    def events(self, event: str | None = None) -> list[dict]:
        """All events in file order, or only those named ``event``; [] before the log exists."""
        out = []
        with contextlib.suppress(FileNotFoundError), open(self.path, encoding="utf-8") as f:
            for line in f:
                with contextlib.suppress(json.JSONDecodeError):   # a line cut by a crash: redone
                    obj = json.loads(line)
                    if event is None or obj.get("event") == event:
                        out.append(obj)
        return out

    def finished(self, run: str) -> set[str]:
        """Ids of the tasks of ``run`` that logged a ``task_end`` (what resuming skips)."""
        return {e["task_id"] for e in self.events("task_end") if e.get("run") == run}

    def completed_decisions(self, run: str) -> list[dict]:
        """Decisions of the finished tasks of ``run``, from their last (complete) attempt."""
        pending, done = {}, {}
        for e in self.events():
            if e.get("run") == run and e.get("event") == "decision":
                if e.get("decision") == 0:   # a new attempt: a killed one's decisions dropped
                    pending[e["task_id"]] = []
                pending.setdefault(e["task_id"], []).append(e)
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
