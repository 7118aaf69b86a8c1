"""The run log: one JSON line per event, appended as it happens; the source of every reported
figure and what a killed run resumes from. Each event reaches the OS at once (a killed process
loses nothing); ``sync`` fsyncs where a file saved next must not be ahead of the log, and at exit.
A torn last line is skipped on reading, and a ``write_all`` group is read whole or not at all.
"""
import atexit
import contextlib
import itertools
import json
import os
import pathlib
import re
import sys
import threading

import numpy as np


def _default(obj):
    """JSON for numpy arrays and numbers, and sets; anything else fails at the write."""
    if isinstance(obj, (np.ndarray, np.generic, set, frozenset)):  # tuples are arrays already
        return obj.tolist() if isinstance(obj, (np.ndarray, np.generic)) else list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# A lone surrogate has no UTF-8 form: written as U+FFFD, the log stays UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _line(event: str, fields: dict) -> str:
    text = json.dumps({"event": event, **fields}, default=_default, ensure_ascii=False)
    return _SURROGATE.sub("\ufffd", text) + "\n"


BATCH = "_batch"   # "<random id>/<lines>" on every line of a ``write_all``


def _tagged(lines: list[str]) -> str:
    """``lines`` as one write, each tagged with the batch's id and size (the id is random: a
    batch rewritten after a cut one never joins it)."""
    tag = json.dumps(f"{os.urandom(6).hex()}/{len(lines)}")
    return "".join(f'{line[:-2]}, "{BATCH}": {tag}}}\n' for line in lines)


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
            try:
                with open(path, "a+b") as f:   # one append: every byte written before the close
                    size = os.fstat(f.fileno()).st_size
                    if size and os.pread(f.fileno(), 1, size - 1) != b"\n":
                        text = "\n" + text   # after a cut line: never glued onto it
                    f.write(text.encode("utf-8"))
            except OSError as err:   # a full disk, a file-size limit: the log's path named
                raise OSError(err.errno, f"writing the run log failed: {err.strerror or err}",
                              path) from None
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
        self.skipped = 0   # lines the last read left out (cut or damaged)

    def write(self, event: str, **fields) -> None:
        """Appends ``{"event": event, **fields}`` as one line, handed to the OS at once."""
        _append(self.path, _line(event, fields), sync=False)

    def write_all(self, events: "EventBuffer") -> None:
        """Appends the buffered ``events`` in order, in one write, durable before it returns."""
        if events.lines:
            _append(self.path, _tagged(events.lines), sync=True)

    def sync(self) -> None:
        """Returns once every event written so far is durable (fsynced)."""
        _append(self.path, "", sync=True)

    def events(self, event: str | None = None) -> list[dict]:
        """All events in file order, or only those named ``event``; [] before the log exists.
        Lines of an unfinished write are left out (``skipped`` counts them; said once)."""
        out, skipped = [], [0]
        with contextlib.suppress(FileNotFoundError), open(self.path, "rb") as f:
            out = [e for e in _whole(f, skipped) if event is None or e.get("event") == event]
        self.skipped = skipped[0]
        if self.skipped and (str(self.path), self.skipped) not in _reported:
            _reported.add((str(self.path), self.skipped))
            print(f"warning: {self.path}: skipped {self.skipped} line(s) of an unfinished write "
                  "(cut by a kill or a full disk); resuming redoes their work", file=sys.stderr)
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


_reported: set[tuple[str, int]] = set()   # (log, skipped lines) said on stderr


def _parse(raw: bytes) -> dict | None:
    """A line's event; None for a line that is not a JSON object in UTF-8 (cut, or damaged)."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):   # UnicodeDecodeError and JSONDecodeError too
        return None
    return obj if isinstance(obj, dict) else None


def _size(tag) -> int:
    """The line count a batch tag names; 0 for none (or a malformed one)."""
    count = tag.rsplit("/", 1)[-1] if isinstance(tag, str) else ""
    return int(count) if count.isdigit() else 0


def _whole(lines, skipped: list[int]):
    """The events of ``lines`` (bytes) in order; ``skipped[0]`` counts the lines left out:
    those ``_parse`` refuses and every line of a batch not read whole."""
    batch, tag, end = [], None, {}
    for obj in itertools.chain(map(_parse, filter(bytes.strip, lines)), [end]):
        line_tag = obj.pop(BATCH, None) if obj else None
        if batch and line_tag != tag:   # the batch ends here: read whole or not at all
            if len(batch) == _size(tag):
                yield from batch
            else:
                skipped[0] += len(batch)
            batch = []
        tag = line_tag
        if obj is None:
            skipped[0] += 1
        elif obj is not end and _size(tag):
            batch.append(obj)
        elif obj is not end:
            yield obj


class EventBuffer:
    """Events kept in memory, appended to a log in one write (``RunLog.write_all``)."""

    def __init__(self):
        self.lines: list[str] = []

    def write(self, event: str, **fields) -> None:
        """Keeps one event (the line ``RunLog.write`` would write)."""
        self.lines.append(_line(event, fields))
