"""Decisions in flight share retrieval and selector forward passes, with the one-at-a-time result
(retrieval/batching.py, row_blocks.py)."""
import asyncio

import numpy as np
import pytest

from countermem_jax.method import text_embedding as embedding
from countermem_jax.method.retrieval import batching
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.method.selector import dqn, features
from countermem_jax.method.selector.policies import AlwaysTop1, GreedyDQN
from helpers import make_record, paper

WORDS = ["singer", "concert", "age", "stadium", "capacity", "country", "pets", "weight", "course",
         "teacher", "museum", "visit", "employee", "hire", "tv", "show", "poker", "earnings"]


def _records(n: int) -> list:
    rng = np.random.default_rng(0)
    return [make_record(source_task_id=f"b{i % 37}",
                        situation=" ".join(rng.choice(WORDS, 6)) + f" threshold {i}",
                        condition="" if i % 3 else "bound == inclusive",
                        reuse=float(rng.random()) - 0.3) for i in range(n)]


def _queries(n: int) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(1)
    tasks = [TaskFacts(f"b{i % 41}", " ".join(rng.choice(WORDS, 5)),
                       {"bound": "inclusive" if i % 2 else "strict"}) for i in range(n)]
    return tasks, embedding.embed_texts([t.text + f" state {i}" for i, t in enumerate(tasks)])


def _all_at_once(coros):
    async def run():
        return await asyncio.gather(*coros)
    return asyncio.run(run())


@pytest.mark.parametrize("n_records", [8, 200, 256])
def test_batched_retrieval_equals_one_query_at_a_time(n_records):
    """Scores, ranks and exclusions of 40 queries scored in one call equal the 40 single-query
    calls bit for bit (a whole-batch XLA dot rounds differently from a 1-row one)."""
    index = RetrievalIndex(_records(n_records))
    tasks, emb = _queries(40)
    one_by_one = [index.retrieve_embedded([t], e[None])[0] for t, e in zip(tasks, emb)]
    assert index.retrieve_embedded(tasks, emb) == one_by_one
    assert index.retrieve_embedded(tasks[7:30], emb[7:30]) == one_by_one[7:30]
    assert any(r.candidates for r in one_by_one) and any(r.excluded_condition for r in one_by_one)


def test_decisions_in_flight_are_retrieved_in_one_batch_with_the_same_results():
    index = RetrievalIndex(_records(200))
    other = RetrievalIndex(_records(30))
    tasks, emb = _queries(24)
    batcher = batching.retrieval_batcher()
    wrapped, wrapped_other = (batching.BatchedIndex(index, batcher),
                              batching.BatchedIndex(other, batcher))
    assert wrapped.records == index.records and wrapped.checker is index.checker
    got = _all_at_once([batching.retrieve(wrapped if i % 3 else wrapped_other, t, e)
                        for i, (t, e) in enumerate(zip(tasks, emb))])
    want = [(index if i % 3 else other).retrieve_embedded([t], e[None])[0]
            for i, (t, e) in enumerate(zip(tasks, emb))]
    assert got == want
    assert batcher.batch_sizes == [24]  # one turn of the loop, one flush (two indexes inside)
    # Unwrapped, the same call is the plain one-query retrieval.
    assert asyncio.run(batching.retrieve(other, tasks[0], emb[0])) == want[0]


def _greedy(seed: int) -> GreedyDQN:
    cfg = paper("dqn")
    return GreedyDQN(cfg, dqn.init_state(cfg, seed).params)


def test_batched_selector_forward_passes_equal_one_at_a_time():
    rng = np.random.default_rng(2)
    obs = rng.normal(size=(40, features.OBS_DIM)).astype(np.float32)
    masks = rng.random((40, 5)) < 0.7
    masks[:, 0] = True
    selectors = [_greedy(0), _greedy(1), AlwaysTop1()]
    batcher = batching.selection_batcher()
    wrapped = [batching.BatchedSelector(s, batcher) for s in selectors]
    assert wrapped[0].name == "dqn" and wrapped[2].name == "always_top1"
    got = _all_at_once([batching.select(wrapped[i % 3], o, m)
                        for i, (o, m) in enumerate(zip(obs, masks))])
    want = [selectors[i % 3].select(o, m) for i, (o, m) in enumerate(zip(obs, masks))]
    assert [c.action for c in got] == [c.action for c in want]
    for g, w in zip(got, want):
        assert (g.q_values is None and w.q_values is None) or \
            np.array_equal(g.q_values, w.q_values)
    assert batcher.batch_sizes == [40]
    # The rows of one forward pass over many equal the lone passes bit for bit (XLA switches
    # kernels for large batches).
    many = rng.normal(size=(130, features.OBS_DIM)).astype(np.float32)
    q_all = selectors[0].q_values(many)
    assert all(np.array_equal(q_all[i], selectors[0].q_values(many[i])) for i in range(130))


def test_a_failing_item_raises_in_its_own_waiter_only_and_later_batches_still_run():
    calls = []

    def compute(items):
        calls.append(list(items))
        if "bad" in items:
            raise ValueError("boom")
        return [x.upper() for x in items]
    batcher = batching.MicroBatcher(compute)

    async def run():
        first = await asyncio.gather(batcher.submit("a"), batcher.submit("bad"),
                                     return_exceptions=True)
        second = await asyncio.gather(batcher.submit("b"), batcher.submit("c"))
        return first, second
    first, second = asyncio.run(run())
    assert first[0] == "A" and isinstance(first[1], ValueError) and second == ["B", "C"]
    assert calls == [["a", "bad"], ["a"], ["bad"], ["b", "c"]]
