"""Token-level diffs whose cost is bounded whatever the model wrote.

``opcodes`` equals ``difflib.SequenceMatcher`` up to ``MAX_CELLS``; above it only the differing
middle is aligned, or reported as one changed region (``Diff.exact`` False), which callers treat
as too long to judge.
"""
import dataclasses
import difflib
from typing import Sequence

# len(a) * len(b) aligned by SequenceMatcher at most: about 0.1 s in its worst case.
MAX_CELLS = 250_000


@dataclasses.dataclass(frozen=True)
class Diff:
    """Opcodes as ``SequenceMatcher.get_opcodes`` gives them; ``exact`` False when a middle
    too long to align was reported as one changed region."""
    opcodes: list
    exact: bool = True

    @property
    def changes(self) -> list:
        """The opcodes other than "equal"."""
        return [op for op in self.opcodes if op[0] != "equal"]


def opcodes(a: Sequence, b: Sequence, max_cells: int = MAX_CELLS) -> Diff:
    """The opcodes turning ``a`` into ``b`` at a cost bounded by ``max_cells`` per alignment."""
    if len(a) * len(b) <= max_cells:
        return Diff(difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes())
    head = _common_length(a, b)
    tail = _common_length(a[head:][::-1], b[head:][::-1])
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    exact = len(mid_a) * len(mid_b) <= max_cells
    if exact:
        inner = [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in
                 difflib.SequenceMatcher(a=mid_a, b=mid_b, autojunk=False).get_opcodes()]
    else:
        inner = [("replace", head, len(a) - tail, head, len(b) - tail)]
    ops = ([("equal", 0, head, 0, head)] if head else []) + [
        op for op in inner if op[1] != op[2] or op[3] != op[4]]
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return Diff(ops, exact)


def _common_length(a: Sequence, b: Sequence) -> int:
    """The length of the common prefix of ``a`` and ``b``, found by bisection on slices (each
    comparison runs in C; the slices compared add up to about the prefix's length)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
