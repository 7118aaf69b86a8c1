"""Harmful use against the memory-free run at the same decision (paper Fig. 5(d)), the Eq. 6
label kept apart, and the funnel from decision to harmful use (protocol/metrics.py): every count
here is moved off its trivial value by a case built for it."""
from countermem_jax.protocol import metrics


def _d(task, k, draft, action, success, record=None, label=0, utility=None, **memory):
    return {"task_id": task, "decision": k, "draft": draft, "action": action,
            "changed": draft != action,
            "outcome": {"success": success, "utility": float(success if utility is None
                                                             else utility)},
            "memory": {"covered": record is not None,
                       **({"record_id": record} if record else {}), **memory},
            "reuse": {"record_id": record, "label": label} if record else {}}


def _end(task, solved, calls=2, tokens=10):
    return {"task_id": task, "solved": solved, "calls": calls, "failures": int(not solved),
            "tokens": tokens}


def _base(*decisions):
    return [dict(d, memory={}, reuse={}) for d in decisions]


def test_a_use_worse_than_the_memory_free_run_at_the_same_decision_is_harmful():
    """The memory-free run solves t1 at its first decision; the record use there changes the
    draft to a failing action. Harmful, and t1 broken; the Eq. 6 label says 0 (no previous
    attempt to be worse than), which is why it is no harm count."""
    base = _base(_d("t1", 0, "A", "A", True))
    mem = [_d("t1", 0, "A", "X", False, "r1"), _d("t1", 1, "A2", "A2", False)]
    m = metrics.run_metrics([_end("t1", False)], mem, base)
    assert (m["harmful_uses"], m["paired_uses"], m["harmful_use_rate"]) == (1, 1, 1.0)
    assert m["harmful_changes"] == 1 and m["reuse_label_harmful"] == 0
    assert metrics.paired([_end("t1", True)], [_end("t1", False)])["broken"] == 1


def test_a_lower_utility_at_the_same_decision_is_harmful_too():
    base = _base(_d("t1", 0, "A", "A", False, utility=0.6))
    mem = [_d("t1", 0, "A", "X", False, "r1", utility=0.2)]
    assert metrics.run_metrics([_end("t1", False)], mem, base)["harmful_uses"] == 1


def test_harm_is_undefined_without_the_memory_free_run_and_unpaired_past_its_end():
    """No memory-free decisions: None, not 0. A use at a decision the memory-free run never
    reached (it had solved the task) is unpaired, neither harmful nor harmless."""
    mem = [_d("t1", 0, "A", "A", False), _d("t1", 1, "B", "Y", False, "r1")]
    assert metrics.run_metrics([_end("t1", False)], mem)["harmful_uses"] is None
    m = metrics.run_metrics([_end("t1", False)], mem, _base(_d("t1", 0, "A", "A", True)))
    assert (m["harmful_uses"], m["paired_uses"], m["unpaired_uses"]) == (0, 0, 1)
    assert m["harmful_use_rate"] is None


def test_every_step_of_the_funnel_moves():
    base = _base(_d("t1", 0, "A", "A", True), _d("t2", 0, "B", "B", False),
                 _d("t3", 0, "C", "C", False))
    mem = [_d("t1", 0, "A", "X", False, "r1", excluded_transfer=["r7", "r8"]),
           _d("t1", 1, "A2", "A2", True),
           _d("t2", 0, "B", "Z", True, "r2", label=1, excluded_stale=["r5"],
              conditions={"compatible": 2, "incompatible": 3, "undecided": 1,
                          "judge_calls": 4, "judge_tokens": 40}),
           _d("t3", 0, "C", "C", False, excluded_no_place=["r3"]),
           _d("t3", 1, "D", "D", False, "r4", revision="no_place")]
    ends = [_end("t1", True), _end("t2", True), _end("t3", False, calls=3, tokens=5)]
    f = metrics.run_metrics(ends, mem, base)["funnel"]
    assert f == {"decisions": 5, "failed_drafts": 3, "draft_unknown": 0, "with_candidate": 3,
                 "conditions_compatible": 2, "conditions_incompatible": 3,
                 "conditions_undecided": 1, "no_place": 1, "refuted_by_transfer": 2, "stale": 1,
                 "selected": 3, "changed": 2, "right": 1, "wrong": 1, "harmful": 1,
                 "tokens": 25, "checker_calls": 7, "judge_calls": 4, "judge_tokens": 40}
    line = metrics.funnel_line(f)
    assert line.startswith("5 decisions > 3 failed drafts > 3 with a candidate")
    assert "1 harmful; 25 tokens, 7 checker calls, 4 judge calls" in line
    assert metrics.add_funnels([f, f])["refuted_by_transfer"] == 4
    assert metrics.add_funnels([f, dict(f, harmful=None)])["harmful"] is None


def test_a_changed_draft_of_a_diverged_history_has_an_unknown_outcome():
    base = _base(_d("t1", 0, "A", "A", False))
    mem = [_d("t1", 0, "Q", "X", False, "r1")]   # not the memory-free run's action there
    f = metrics.funnel([_end("t1", False)], mem, base)
    assert (f["failed_drafts"], f["draft_unknown"]) == (0, 1)
    assert "(+1 unknown)" in metrics.funnel_line(f)


def test_the_evaluation_table_prints_harm_and_the_funnel():
    base_ends = [_end("t1", True), _end("t2", False)]
    mem_ends = [_end("t1", False), _end("t2", True)]
    base = _base(_d("t1", 0, "A", "A", True), _d("t2", 0, "B", "B", False))
    mem = [_d("t1", 0, "A", "X", False, "r1"), _d("t2", 0, "B", "Z", True, "r2", label=1)]
    agg = metrics.seed_aggregate(base_ends, {"0": mem_ends}, {"0": mem}, base)
    empty = metrics.cost([])
    result = {"base": metrics.run_metrics(base_ends, base), "aggregate": agg,
              "base_score": agg["score"],
              "cost_of_building": {"construction": empty, "total": empty,
                                   "selector_training": {"total": empty, "per_seed": {}}}}
    table = metrics.comparison_table(result, "ReAct")
    row = next(line for line in table.splitlines() if line.startswith("harmful uses (vs no"))
    assert row.split()[-1] == "1"
    assert "reuse label -1 (Eq. 6)" in table
    assert "funnel: 2 decisions > 1 failed drafts" in table
    assert "difference: Tango score interval" in table
