"""Retrievals and selector forward passes of the decisions in flight, scored together: a lone
jitted query pays the dispatch for microseconds of arithmetic. ``MicroBatcher`` computes what the
decisions submit during one event-loop turn in one call; results equal the one-at-a-time ones
bit for bit (fixed row blocks, ``row_blocks``; everything else per row).
"""
import asyncio
import collections
from typing import Any, Callable, Sequence

import numpy as np

from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.retrieval.retrieve import RetrievalIndex, RetrievalResult
from countermem_jax.method.selector.network import masked_argmax
from countermem_jax.method.selector.policies import Choice


class MicroBatcher:
    """``await submit(item)`` -> ``compute(items)[i]``, items submitted in one loop turn together.

    ``compute`` maps a list of items to the list of their results; it runs on the event loop,
    once per turn that saw a submission. If it raises, the batch is computed again item by item,
    so that an item fails alone, as it would have one at a time.
    """

    def __init__(self, compute: Callable[[list], Sequence]):
        self._compute = compute
        self._pending: dict[asyncio.AbstractEventLoop, list] = {}
        self.batch_sizes: list[int] = []  # one entry per call of ``compute``

    async def submit(self, item) -> Any:
        """``compute([..., item, ...])``'s result for ``item``, computed with every item
        submitted in the same event-loop turn."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        pending = self._pending.setdefault(loop, [])
        pending.append((item, future))
        if len(pending) == 1:  # the first of this turn: flush after the callbacks ready now
            loop.call_soon(self._flush, loop)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(loop, [])
        if not batch:
            return
        self.batch_sizes.append(len(batch))
        try:
            results = list(self._compute([item for item, _ in batch]))
        except Exception as err:  # noqa: BLE001 - handed to the waiters
            if len(batch) == 1:
                _settle(batch[0][1], error=err)
            else:  # item by item, so that only a failing item raises
                for item, future in batch:
                    try:
                        _settle(future, self._compute([item])[0])
                    except Exception as item_err:  # noqa: BLE001
                        _settle(future, error=item_err)
            return
        for (_, future), result in zip(batch, results, strict=True):
            _settle(future, result)


def _settle(future: asyncio.Future, result=None, error: Exception | None = None) -> None:
    """Hands a waiter its result or error (a cancelled waiter gets nothing)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _grouped(items: list, compute_group: Callable[[Any, list], list]) -> list:
    """Items are (owner, ...) tuples; ``compute_group(owner, items of that owner)`` per owner, in
    the order of first appearance; results back in item order."""
    groups: dict[int, list[int]] = collections.defaultdict(list)
    for i, item in enumerate(items):
        groups[id(item[0])].append(i)
    out: list = [None] * len(items)
    for positions in groups.values():
        results = compute_group(items[positions[0]][0], [items[i] for i in positions])
        for i, result in zip(positions, results, strict=True):
            out[i] = result
    return out


def _retrieve_group(index: RetrievalIndex, items: list) -> list[RetrievalResult]:
    return index.retrieve_embedded([task for _, task, _ in items],
                                   np.stack([emb for _, _, emb in items]))


def _select_group(selector, items: list) -> list[Choice]:
    if not hasattr(selector, "q_values"):  # a fixed rule: nothing to batch
        return [selector.select(obs, mask) for _, obs, mask in items]
    q = selector.q_values(np.stack([obs for _, obs, _ in items]))
    return [Choice(int(masked_argmax(q_row, np.asarray(mask))), q_row)
            for q_row, (_, _, mask) in zip(q, items)]


def retrieval_batcher() -> MicroBatcher:
    """A batcher of ``(index, task, state embedding)`` retrievals, grouped by index."""
    return MicroBatcher(lambda items: _grouped(items, _retrieve_group))


def selection_batcher() -> MicroBatcher:
    """A batcher of ``(selector, observation, mask)`` selections, grouped by selector."""
    return MicroBatcher(lambda items: _grouped(items, _select_group))


class BatchedIndex:
    """A ``RetrievalIndex`` whose one-query retrievals go through a shared batcher; every other
    attribute (records, checker, use_conditions, ...) is the index's own."""

    def __init__(self, index: RetrievalIndex, batcher: MicroBatcher):
        self.index, self.batcher = index, batcher

    def __getattr__(self, name):
        if name in ("index", "batcher"):  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.index, name)

    async def retrieve_one(self, task: TaskFacts, embedding: np.ndarray) -> RetrievalResult:
        """The index's retrieval for one embedded decision state, batched with the others in
        flight; the same result as ``index.retrieve_embedded([task], ...)`` alone."""
        return await self.batcher.submit((self.index, task, np.asarray(embedding, np.float32)))


class BatchedSelector:
    """A frozen selector whose ``select`` calls go through a shared batcher."""

    def __init__(self, selector, batcher: MicroBatcher):
        self.selector, self.batcher = selector, batcher

    def __getattr__(self, name):
        if name in ("selector", "batcher"):
            raise AttributeError(name)
        return getattr(self.selector, name)

    async def select_one(self, obs: np.ndarray, mask: np.ndarray) -> Choice:
        """The frozen selector's choice (Appendix C.1) for one observation and action mask,
        batched with the other decisions in flight."""
        return await self.batcher.submit((self.selector, np.asarray(obs, np.float32), mask))


async def retrieve(index, task: TaskFacts, embedding: np.ndarray) -> RetrievalResult:
    """One decision's retrieval: batched with the decisions in flight if ``index`` is a
    ``BatchedIndex``, else on its own."""
    if isinstance(index, BatchedIndex):
        return await index.retrieve_one(task, embedding)
    return index.retrieve_embedded([task], np.asarray(embedding)[None])[0]


async def select(selector, obs: np.ndarray, mask: np.ndarray) -> Choice:
    """One decision's selection: batched if ``selector`` is a ``BatchedSelector``."""
    if isinstance(selector, BatchedSelector):
        return await selector.select_one(obs, mask)
    return selector.select(obs, mask)
