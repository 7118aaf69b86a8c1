"""Admission, eviction, reuse and freezing of the record store (paper Appendix B)."""
import dataclasses

import pytest

from countermem_jax.method.memory import FrozenStoreError, MemoryStore, reuse_label, update_reuse
from countermem_jax.method.memory.record import normalize_condition
from helpers import make_record, paper


def _distinct(i, **kw):
    return make_record(source_task_id=f"t{i}", situation=f"situation number {i} about table_{i}",
                       original=f"SELECT c{i} FROM tab{i} WHERE x{i} > {i}",
                       improved=f"SELECT DISTINCT c{i} FROM tab{i} WHERE y{i} <= {i * 7}", **kw)


def test_delta_equal_to_epsilon_is_rejected():
    store = MemoryStore(paper("store"))
    decision, _ = store.propose(make_record(before=0.5, after=0.55))
    assert not decision.admitted and decision.reason == "delta<=epsilon"
    assert len(store) == 0


def test_delta_just_above_epsilon_passes_the_gain_gate():
    decision, _ = MemoryStore(paper("store")).propose(make_record(before=0.5, after=0.56))
    assert decision.reason in ("admitted", "score<=threshold")
    assert decision.reason != "delta<=epsilon"


def test_small_gain_below_score_threshold_is_rejected():
    # Δ = 0.08 > ε, but S_adm = 0.08 <= τ_adm = 0.1.
    decision, _ = MemoryStore(paper("store")).propose(make_record(before=0.5, after=0.58))
    assert not decision.admitted and decision.reason == "score<=threshold"
    assert decision.score == pytest.approx(0.08, abs=1e-6)


def test_unverified_record_is_rejected_however_large_its_gain():
    decision, _ = MemoryStore(paper("store")).propose(make_record(completed=False))
    assert not decision.admitted and decision.reason == "unverified"


def test_admitted_record_stores_its_score():
    store = MemoryStore(paper("store"))
    decision, _ = store.propose(make_record())
    assert decision.admitted and decision.score == pytest.approx(1.0)
    assert store.records[0].admission_score == pytest.approx(1.0)
    assert store.records[0].reuse_utility == 0.0


def test_duplicate_advice_is_rejected():
    store = MemoryStore(paper("store"))
    store.propose(make_record(source_task_id="a"))
    decision, _ = store.propose(make_record(source_task_id="b"))
    assert not decision.admitted and decision.reason == "duplicate"
    assert len(store) == 1


def test_conflicting_advice_is_rejected():
    store = MemoryStore(paper("store"))
    store.propose(make_record(source_task_id="a"))
    conflict = make_record(source_task_id="b", improved="SELECT name FROM people WHERE age > 17")
    decision, _ = store.propose(conflict)
    assert decision.conflict == 1.0
    assert not decision.admitted and decision.reason == "score<=threshold"


def test_repeated_partial_advice_is_penalised():
    store = MemoryStore(paper("store"))
    store.propose(make_record(source_task_id="a", situation="s1"))
    near = make_record(source_task_id="b", situation="s2", before=0.0, after=0.5,
                       improved="SELECT name FROM people WHERE age >= 18 ", condition="")
    decision, _ = store.propose(near)
    assert decision.repeat > 0.9
    assert not decision.admitted


def test_none_condition_maps_to_empty():
    assert normalize_condition("none") == ""
    assert normalize_condition(' "None." ') == ""
    assert normalize_condition('"bound == inclusive"') == "bound == inclusive"
    rule = 'environment == db AND feedback contains "no such column"'
    assert normalize_condition(rule) == rule   # a closing quote of a phrase is kept
    assert normalize_condition("bound == inclusive") == "bound == inclusive"


@pytest.mark.parametrize("rule,expected_victim", [
    ("recency", "t0"),      # oldest goes
    ("utility", "t1"),      # lowest S_keep: smallest Δ and negative reuse
    ("similarity", "t2"),   # t2 and t3 nearly repeat each other; the older of the pair goes
])
def test_eviction_order_per_rule(rule, expected_victim):
    store = MemoryStore(paper("store", capacity=3, retention=rule))
    records = [
        _distinct(0, reuse=0.5),
        _distinct(1, before=0.3, after=0.8),
        make_record(source_task_id="t2", situation="the query must count distinct singers by age",
                    original="SELECT count(*) FROM singer", improved="SELECT count(DISTINCT name) FROM singer",
                    condition=""),
    ]
    for r in records:
        assert store.propose(r)[0].admitted, r
    store._records[1] = dataclasses.replace(store._records[1], reuse_utility=-0.9)
    newcomer = make_record(source_task_id="t3",
                           situation="the query must count distinct singers by age!",
                           original="SELECT count(*) FROM concert",
                           improved="SELECT count(DISTINCT stadium_id) FROM concert", condition="")
    decision, evicted = store.propose(newcomer)
    assert decision.admitted
    victim = [r for r in records + [newcomer] if r.record_id == evicted[0]][0]
    assert victim.source_task_id == expected_victim
    assert len(store) == 3


def test_random_eviction_is_seeded():
    def run(seed):
        store = MemoryStore(paper("store", capacity=4, retention="random", seed=seed))
        evicted = []
        for i in range(12):
            evicted += store.propose(_distinct(i))[1]
        return evicted
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_capacity_is_never_exceeded():
    store = MemoryStore(paper("store", capacity=5))
    for i in range(20):
        store.propose(_distinct(i))
    assert len(store) == 5


@pytest.mark.parametrize("draft,executed,solved,utility,previous,label", [
    ("SELECT 1", "SELECT  1", True, 1.0, 0.0, 0),     # unchanged action -> neutral, even if solved
    ("SELECT 1", "SELECT 2", True, 1.0, None, 1),     # changed and solved -> beneficial
    ("SELECT 1", "SELECT 2", False, 0.0, 0.5, -1),    # changed, worse than previous attempt
    ("SELECT 1", "SELECT 2", False, 0.7, 0.5, 1),     # changed, better than previous attempt
    ("SELECT 1", "SELECT 2", False, 0.5, 0.5, 0),     # changed, no utility change
    ("SELECT 1", "SELECT 2", False, 0.0, None, 0),    # changed, unsolved, no reference -> neutral
])
def test_reuse_labels(draft, executed, solved, utility, previous, label):
    assert reuse_label(draft, executed, solved, utility, previous) == label


def test_reuse_update_is_exponential_average():
    r = make_record()
    r = update_reuse(r, 1, paper("store").reuse_rho)
    assert r.reuse_utility == pytest.approx(0.3)
    r = update_reuse(r, -1, paper("store").reuse_rho)
    assert r.reuse_utility == pytest.approx(0.7 * 0.3 - 0.3)
    assert (r.uses, r.helpful_uses, r.harmful_uses) == (2, 1, 1)
    with pytest.raises(ValueError):
        update_reuse(r, 2, paper("store").reuse_rho)


def test_frozen_store_rejects_every_mutation():
    store = MemoryStore(paper("store"))
    store.propose(make_record())
    frozen = store.freeze()
    rid = frozen.records[0].record_id
    with pytest.raises(FrozenStoreError):
        frozen.propose(_distinct(5))
    with pytest.raises(FrozenStoreError):
        frozen.observe_reuse(rid, 1)
    with pytest.raises(FrozenStoreError):
        frozen.config = paper("store", capacity=1)
    with pytest.raises(AttributeError):
        frozen.records.append(_distinct(6))
    with pytest.raises(dataclasses.FrozenInstanceError):
        frozen.records[0].reuse_utility = 1.0
    assert len(frozen) == 1


def test_content_hash_tracks_content():
    store = MemoryStore(paper("store"))
    store.propose(make_record())
    h1 = store.freeze().content_hash()
    store.observe_reuse(store.records[0].record_id, 1)
    assert store.freeze().content_hash() != h1


def _built(created_at: str, **record) -> MemoryStore:
    """A store of one record built by its own run: its own random store id and record time."""
    store = MemoryStore(paper("store"))
    rec = make_record(**record)
    store.propose(dataclasses.replace(rec, provenance=dataclasses.replace(
        rec.provenance, created_at=created_at, snapshot_id=store.snapshot_id)))
    return store


def test_build_hash_ignores_only_the_runs_identity():
    a, b = _built("2026-11-22T00:00:00Z").freeze(), _built("2026-11-23T09:30:00Z").freeze()
    assert a.snapshot_id != b.snapshot_id and a.content_hash() != b.content_hash()
    assert a.build_hash() == b.build_hash()
    # anything the build decided still changes it: another correction, another reuse count
    assert _built("2026-11-22T00:00:00Z", improved="SELECT name FROM people WHERE age >= 19") \
        .build_hash() != a.build_hash()
    used = _built("2026-11-22T00:00:00Z")
    used.observe_reuse(used.records[0].record_id, 1)
    assert used.build_hash() != a.build_hash()
