"""The low-utility suppression gate (Appendix D.2): during construction a record whose reuse
utility fell below the threshold after enough uses is not offered; training and evaluation see
it."""
from helpers import default_config
from countermem_jax.phases import context
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.conditions.checkers import CompositeChecker
from helpers import make_record


def _offered(index, task="t9"):
    result = index.retrieve(TaskFacts(task, "numeric threshold omits its boundary value"))
    return {c.record.record_id for c in result.candidates}


def _records():
    harmful = make_record("t1", reuse=-0.51, uses=3, harmful=2, condition="")
    young = make_record("t2", situation="numeric threshold omits the boundary", reuse=-0.3,
                        uses=1, harmful=1, condition="")
    return harmful, young


def test_gate_withholds_low_utility_records_during_construction_only():
    cfg = default_config()
    harmful, young = _records()
    build = context.retrieval_index(context.method_config(cfg), [harmful, young], CompositeChecker(), construction=True)
    assert _offered(build) == {young.record_id}   # one harmful use is not enough evidence
    for kwargs in ({}, {"evaluation": True}):    # selector training, evaluation: gate inactive
        index = context.retrieval_index(context.method_config(cfg), [harmful, young], CompositeChecker(), **kwargs)
        assert _offered(index) == {harmful.record_id, young.record_id}


def test_gate_follows_its_config_fields():
    cfg = default_config()
    harmful, young = _records()
    cfg.memory.suppress_after_uses = 1
    index = context.retrieval_index(context.method_config(cfg), [harmful, young], CompositeChecker(), construction=True)
    assert _offered(index) == set()
    cfg.memory.suppress_after_uses = 0   # off
    index = context.retrieval_index(context.method_config(cfg), [harmful, young], CompositeChecker(), construction=True)
    assert _offered(index) == {harmful.record_id, young.record_id}
