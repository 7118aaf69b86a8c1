"""Row-wise functions evaluated in blocks of a fixed number of rows, whatever the batch.

XLA's CPU dot rounds a 1-row product and a 200-row one differently; blocks of exactly ``block``
rows (the last one padded) make a row's result bit for bit independent of its batch.
"""
from typing import Callable, Sequence

import numpy as np


def _padded(array: np.ndarray, rows: int, fill) -> np.ndarray:
    out = np.full((rows,) + array.shape[1:], fill, array.dtype)
    out[: len(array)] = array
    return out


def in_blocks(fn: Callable, block: int, arrays: Sequence[np.ndarray | None],
              fills: Sequence) -> tuple[np.ndarray, ...]:
    """``fn(*block_arrays)`` over blocks of ``block`` rows of ``arrays`` (None passes through;
    padding rows hold ``fills``); its outputs (an array or a tuple of arrays, leading axis =
    rows) concatenated and cut back to the real rows."""
    n = len(next(a for a in arrays if a is not None))
    total = -(-n // block) * block
    padded = [None if a is None else _padded(np.asarray(a), total, f)
              for a, f in zip(arrays, fills)]
    outs = []
    for start in range(0, total, block):
        out = fn(*(None if a is None else a[start:start + block] for a in padded))
        outs.append(tuple(np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))))
    return tuple(np.concatenate(parts)[:n] for parts in zip(*outs))
