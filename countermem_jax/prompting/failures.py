"""The log of reply-contract violations (paper Appendix D.8: every parse failure is logged).

One ``ParseFailureLog`` per run, handed explicitly to whoever calls templates (the ``Agent``, and
through it every augmentation and baseline), so two runs in one process never share a log and no
phase has to repoint a module-level object. With a ``path`` each failure is also appended to a
JSONL file (the phases use ``<workdir>/parse_failures.jsonl``).
"""
import json
import threading


class ParseFailureLog:
    """Every contract violation of one run, kept in memory and, with ``path``, mirrored line by
    line to a JSONL file (thread-safe: agents in flight at once share one log)."""

    def __init__(self, path=None):
        self.path = str(path) if path else None
        self.items: list[dict] = []
        self._lock = threading.Lock()

    def add(self, **item) -> None:
        """Records one failure (template, decision, attempt, error, the reply's start)."""
        with self._lock:
            self.items.append(item)
            if self.path:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(item, ensure_ascii=False) + "\n")
