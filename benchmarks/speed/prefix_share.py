"""The share of prompt characters that repeat an earlier prompt's prefix: what a server's prefix
cache (vLLM's) can serve. The pipeline benchmark prints it per phase (docs/speed.md)."""
import bisect
import threading


class PrefixShare:
    """Characters of the prompts sent and, of those, the ones a prompt shares with the longest
    common prefix of any earlier prompt (``shared``); thread-safe. The longest common prefix
    with any string of a set is the longer of those with its neighbours in sorted order."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sorted, self.shared, self.total = [], 0, 0

    @staticmethod
    def _common(a: str, b: str) -> int:
        """Length of the common prefix of ``a`` and ``b``, by bisection on slice comparisons
        (C speed: a character loop in Python slowed the benchmark's client at 64 in flight)."""
        lo, hi = 0, min(len(a), len(b))
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if a[:mid] == b[:mid]:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def add(self, text: str) -> None:
        """Books one prompt sent to the server."""
        with self.lock:
            i = bisect.bisect_left(self.sorted, text)
            near = self.sorted[max(0, i - 1):i + 1]
            self.shared += max((self._common(text, other) for other in near), default=0)
            self.total += len(text)
            self.sorted.insert(i, text)

    @property
    def pct(self) -> float | None:
        return round(100.0 * self.shared / self.total, 1) if self.total else None


def prompt_text(messages) -> str:
    """A chat as one string in message order, roles marked: the order in which a server's
    prefix cache meets its tokens."""
    return "".join(f"<|{m['role']}|>{m.get('content') or ''}" for m in messages)
