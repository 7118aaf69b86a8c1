"""The log of reply-contract violations (paper Appendix D.8: every parse failure is logged)."""
import collections
import json
import threading

# What is counted per template: calls made, replies cut off at their token limit, the retries
# with the larger budget, replies that broke their output constraint, edits refused because
# their FIND text is not in the action, parse failures (violations included), and replies the
# backbone boundary had to repair (invalid UTF-8, lone surrogates, NUL, no answer, over length:
# ``backbones/replies.py``).
REPLY_OUTCOMES = ("calls", "truncated", "truncation_retries", "constraint_violations",
                  "refused_edits", "parse_failures", "malformed_replies")


class ParseFailureLog:
    """Every contract violation of one run, kept in memory and, with ``path``, mirrored line by
    line to a JSONL file (thread-safe: agents in flight at once share one log)."""

    def __init__(self, path=None):
        self.path = str(path) if path else None
        self.items: list[dict] = []
        self.counts: dict[str, collections.Counter] = collections.defaultdict(
            collections.Counter)
        self._lock = threading.Lock()

    def add(self, **item) -> None:
        """Records one failure (template, decision, attempt, error, the reply's start)."""
        with self._lock:
            self.items.append(item)
            self.counts[item.get("template", "")]["parse_failures"] += 1
            self._mirror([item])

    def count(self, template: str, outcome: str, n: int = 1) -> None:
        """Adds ``n`` to ``outcome`` (one of ``REPLY_OUTCOMES``) of ``template``."""
        if n:
            with self._lock:
                self.counts[template][outcome] += n

    def merge(self, other: "ParseFailureLog") -> None:
        """Adds ``other``'s failures (in order, mirrored to ``path``) and counts to this log's
        (a construction run's, when the run commits)."""
        with self._lock:
            self.items.extend(other.items)
            for template, outcomes in other.counts.items():
                self.counts[template].update(outcomes)
            self._mirror(other.items)

    def _mirror(self, items: list[dict]) -> None:
        """Appends ``items`` to the JSONL file, one line each (caller holds the lock)."""
        if self.path and items:
            with open(self.path, "a", encoding="utf-8", errors="replace") as f:
                f.writelines(json.dumps(item, ensure_ascii=False) + "\n" for item in items)

    def summary(self) -> dict:
        """{template: {outcome: count}} for every template called, every outcome present, plus
        ``total`` over templates: what the phases log and report as ``replies``."""
        with self._lock:
            rows = {t: {o: c[o] for o in REPLY_OUTCOMES} for t, c in sorted(self.counts.items())}
        rows["total"] = {o: sum(r[o] for r in rows.values()) for o in REPLY_OUTCOMES}
        return rows

