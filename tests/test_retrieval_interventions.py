"""Retrieval interventions of §6.2 (none / random / shuffled / matched) at the index level."""
import pytest

from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from helpers import make_record

SITUATIONS = ["singers aged at least 30", "museum visits in 2009", "pets heavier than 10 kg",
              "concerts held after 2014", "employees hired before 2010", "tv shows in english"]


def _records():
    return [make_record(source_task_id=f"src{i}", situation=s, original=f"SELECT {i}",
                        improved=f"SELECT {i} + 1", condition="")
            for i, s in enumerate(SITUATIONS)]


def _ids(result):
    return [c.record.record_id for c in result.candidates]


def _task(task_id, text):
    return TaskFacts(task_id=task_id, text=text, features={})


def test_none_returns_nothing():
    result = RetrievalIndex(_records(), intervention="none").retrieve(_task("q", SITUATIONS[0]))
    assert not result.covered and result.eligible_count == 0


def test_shuffled_returns_the_record_reassigned_to_the_matched_state():
    records = _records()
    matched = RetrievalIndex(records, top_k=1).retrieve(_task("q", SITUATIONS[2]))
    shuffled_index = RetrievalIndex(records, top_k=1, intervention="shuffled", intervention_seed=3)
    shuffled = shuffled_index.retrieve(_task("q", SITUATIONS[2]))
    assert _ids(matched) == [records[2].record_id]
    # the top slot is record 2's decision state, but another record sits there
    slot = int(list(shuffled_index.matched_to).index(2))
    assert _ids(shuffled) == [records[slot].record_id] and slot != 2
    assert all(shuffled_index.matched_to[i] != i for i in range(len(records)))
    again = RetrievalIndex(records, top_k=1, intervention="shuffled", intervention_seed=3)
    assert _ids(again.retrieve(_task("q", SITUATIONS[2]))) == _ids(shuffled)  # deterministic


def test_random_ignores_the_state_is_seeded_and_never_returns_own_records():
    records = _records()
    index = RetrievalIndex(records, top_k=3, intervention="random", intervention_seed=0)
    draws = {tuple(_ids(index.retrieve(_task("src0", SITUATIONS[0] + f" v{i}"))))
             for i in range(12)}
    assert len(draws) > 1  # the draw is not the similarity ranking
    assert all(records[0].record_id not in d and len(d) == 3 for d in draws)
    first = _ids(index.retrieve(_task("src0", "same state")))
    assert _ids(RetrievalIndex(records, top_k=3, intervention="random",
                               intervention_seed=0).retrieve(_task("src0", "same state"))) == first
    assert not index.use_conditions


@pytest.mark.parametrize("intervention", ["shuffled", "random"])
def test_own_task_records_stay_excluded(intervention):
    records = [make_record(source_task_id="own", situation=s, original=f"SELECT {i}",
                           improved=f"SELECT {i} + 2", condition="")
               for i, s in enumerate(SITUATIONS[:3])]
    records += _records()[3:]
    index = RetrievalIndex(records, top_k=3, intervention=intervention, intervention_seed=1)
    for text in SITUATIONS:
        result = index.retrieve(_task("own", text))
        assert all(c.record.source_task_id != "own" for c in result.candidates)


def test_unknown_intervention_is_refused():
    with pytest.raises(ValueError, match="unknown retrieval intervention"):
        RetrievalIndex(_records(), intervention="matchd")
