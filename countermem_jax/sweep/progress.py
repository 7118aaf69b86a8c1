"""The sweep's live summary: runs done / running / failed, and tasks and tokens so far, read from
the workdirs' logs (``log.jsonl`` and ``eval/<run>/log.jsonl``: their ``task_end`` events).
"""
import collections
import json
import pathlib
import time


class LogTally:
    """Running totals of finished tasks and their tokens over a set of workdirs."""

    def __init__(self, workdirs):
        self.workdirs = sorted({pathlib.Path(w) for w in workdirs})
        self.offsets: dict[pathlib.Path, int] = {}
        self.tasks = 0
        self.tokens = 0

    def _files(self):
        """The logs that hold ``task_end`` events: each workdir's own and its evaluation runs'."""
        for wd in self.workdirs:
            yield wd / "log.jsonl"
            yield from sorted((wd / "eval").glob("*/log.jsonl")) if (wd / "eval").is_dir() else ()

    def update(self) -> "LogTally":
        """Adds the ``task_end`` events appended since the last update to the totals; returns
        ``self``. Only complete lines are consumed."""
        for path in self._files():
            if not path.is_file():
                continue
            start = self.offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(start)
                chunk = f.read()
            complete = chunk[:chunk.rfind(b"\n") + 1]
            self.offsets[path] = start + len(complete)
            for line in complete.splitlines():
                if b'"task_end"' not in line:  # cheap filter before parsing JSON
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "task_end":
                    self.tasks += 1
                    self.tokens += int(event.get("tokens", 0) or 0)
        return self


def summary_line(states: dict[str, str], tally: LogTally, started: float) -> str:
    """``[sweep 0:01:23] runs: 3 done, 2 skipped, 1 running, ...``: skipped = finished by an
    earlier sweep; running = handed to the executor (on Ray: started, or queued until a node
    has the CPUs and LLM slots it reserves)."""
    counts = collections.Counter(states.values())
    elapsed = int(time.time() - started)
    order = ("done", "skipped", "running", "waiting", "failed", "blocked")
    parts = [f"{counts[s]} {s}" for s in order if counts[s]]
    return (f"[sweep {elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}] runs: "
            f"{', '.join(parts)} of {len(states)} | tasks finished {tally.tasks} | "
            f"tokens {tally.tokens:,}")
