"""The decision log: one JSON line per event, appended and flushed as it happens.

Every decision (task, phase, draft, retrieved records and exclusions, selector choice and
Q-values, revised action, outcome, costs), every counterfactual check and every task end is
written. A killed run reads its log back to skip finished tasks.
"""
import json
import os
import pathlib
import threading

import numpy as np


def _default(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


class RunLog:
    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, event: str, **fields) -> None:
        line = json.dumps({"event": event, **fields}, default=_default, ensure_ascii=False)
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def events(self, event: str | None = None) -> list[dict]:
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
                if e.get("decision") == 0:
                    pending[tid] = []
                pending.setdefault(tid, []).append(e)
            else:
                done[tid] = pending.pop(tid, [])
        return [d for decisions in done.values() for d in decisions]
