"""The replication over split seeds (configs/studies/replication.py, issue 36): split seeds and
disjoint evaluation folds of whole reference groups (protocol/splits.py), and the small variant
end to end with the scripted backbone and the real SQL checker, pooled over seeds with the
bootstrap over reference groups."""
import dataclasses
import importlib.util
import json
import pathlib
import random

import pytest

from countermem_jax.phases import config_fingerprint
from countermem_jax.protocol import intervals
from countermem_jax.protocol import splits as splits_lib
from countermem_jax.reporting import build
from countermem_jax.studies import protocols, replication
from evaluators.grouping import group_key
from study_fixtures import make_benchmark, scripted
from helpers import cpu_config

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAIN = ("countermem_dqn", "countermem_top1")
ABLATIONS = ("cf_without_wm", "wm_without_cf")


def twin_benchmark(root):
    """The study fixtures' two databases, every other question with a paraphrase twin (same gold
    query, another wording): 20 questions alone or in 10 twin pairs, 30 tasks, 20 groups."""
    tasks, evaluator, domain = make_benchmark(root, n_per_table=10)
    twins = [dataclasses.replace(t, task_id=f"{t.task_id}_twin",
                                 prompt=t.prompt.replace("List the names of", "Name all"))
             for t in tasks[::2]]
    return tasks + twins, evaluator, domain


def _config(arg="cpu,small"):
    spec = importlib.util.spec_from_file_location(
        "replication_config", ROOT / "configs" / "studies" / "replication.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config(arg)


def _groups(tasks):
    return {t.task_id: group_key(t) for t in tasks}


def _group_ids(tasks):
    return {t.task_id: replication.reference_group(t) for t in tasks}


# ----------------------------------------------------------------------------- split seeds
def test_split_seed_zero_is_the_papers_draw(tmp_path):
    tasks = twin_benchmark(tmp_path)[0]
    assert splits_lib.stream_seeds(0) == (splits_lib.EVAL_SEED, splits_lib.BUILD_SEED,
                                          splits_lib.TRAIN_SEED)
    default = splits_lib.make_splits(tasks, 4, 2, 1, 4)
    legacy_eval = random.Random(splits_lib.EVAL_SEED).sample(
        sorted(tasks, key=lambda t: t.task_id), 4)
    assert [t.task_id for t in default.eval] == [t.task_id for t in legacy_eval]
    assert "split_seed" not in default.manifest()   # default manifests are unchanged
    other = splits_lib.make_splits(tasks, 4, 2, 1, 4, split_seed=1)
    assert other.manifest()["eval"] != default.manifest()["eval"]
    assert other.manifest()["build"] != default.manifest()["build"]


def test_folds_are_disjoint_exact_and_keep_groups_whole(tmp_path):
    tasks = twin_benchmark(tmp_path)[0]
    group_of = _groups(tasks)
    seen = set()
    for seed in range(3):
        sp = splits_lib.make_splits(tasks, 6, 2, 1, 6, split_seed=seed, folds=3)
        ev = {t.task_id for t in sp.eval}
        assert len(ev) == 6 and not ev & seen
        seen |= ev
        eval_groups = {group_of[i] for i in ev}
        # every task of an evaluated group is evaluated; no other split touches the group
        assert {t.task_id for t in tasks if group_of[t.task_id] in eval_groups} == ev
        rest = [t.task_id for t in sp.build + sp.train + sp.validation]
        assert not {group_of[i] for i in rest} & eval_groups
    assert len(seen) == 18


def test_folds_the_pool_cannot_hold_are_refused(tmp_path):
    tasks = twin_benchmark(tmp_path)[0]
    with pytest.raises(splits_lib.SplitError, match="splits.folds=0"):
        splits_lib.make_splits(tasks, 4, 2, 1, 12, split_seed=0, folds=3)
    with pytest.raises(splits_lib.SplitError, match="names no fold"):
        splits_lib.make_splits(tasks, 4, 2, 1, 4, split_seed=3, folds=3)


def test_split_seed_fields_keep_old_fingerprints():
    cfg = cpu_config()
    fields = config_fingerprint.fingerprint_fields(cfg, "build_memory")
    old = {k: v for k, v in fields.items() if k not in ("splits.seed", "splits.folds")}
    assert config_fingerprint._differences(old, fields) == []
    cfg.splits.seed = 1
    assert config_fingerprint._differences(
        old, config_fingerprint.fingerprint_fields(cfg, "build_memory")) == [
        "splits.seed: 0 -> 1"]


# ----------------------------------------------------------------------------- the study
def _small_study(tmp_path):
    study = _config()
    c = study.base
    c.backbone.cache_dir = ""
    c.agent.max_attempts = 2
    c.memory.top_k = 1
    c.construction.update(scope_free_text_conditions=False, reuse_policy="always_skip",
                          verification_budget=4)
    return study


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    """The small variant run once (3 split seeds, the ablations on seed 0), with every group
    list the pooled bootstrap was given."""
    tmp_path = tmp_path_factory.mktemp("replication")
    bench = twin_benchmark(tmp_path)
    given = []
    real = intervals.paired_score_interval

    def recording(base, treated, groups, **kw):
        given.append(list(groups))
        return real(base, treated, groups, **kw)
    intervals.paired_score_interval = recording
    try:
        record = replication.run(_small_study(tmp_path), tmp_path / "rep",
                                 backbone_factory=scripted, benchmark=bench)
    finally:
        intervals.paired_score_interval = real
    return record, bench, given, tmp_path / "rep"


def test_small_replication_pools_every_seed(replicated, capsys):
    record, _, _, root = replicated
    assert json.loads((root / "study.json").read_text())["schema"] == "countermem-study-rows/1"
    arms = record["pooled"]["arms"]
    assert list(arms) == ["react", *MAIN, *ABLATIONS]
    for arm in ("react", *MAIN):
        assert arms[arm]["seeds"] == [0, 1, 2] and arms[arm]["tasks"] == 12
    for arm in ABLATIONS:
        assert arms[arm]["seeds"] == [0] and arms[arm]["tasks"] == 4
    for arm in (*MAIN, *ABLATIONS):
        row = arms[arm]
        assert {"difference", "rescued", "broken", "sign_test_p", "uses", "harmful", "changed",
                "changed_right", "funnel"} <= set(row)
        assert row["changed_right"] <= row["changed"] <= row["uses"]
        assert row["funnel"]["selected"] == row["uses"] and row["harmful"] is not None
    per_seed = record["pooled"]["per_seed"]
    assert list(per_seed) == ["0", "1", "2"]
    assert list(per_seed["0"]) == ["react", *MAIN, *ABLATIONS]
    assert list(per_seed["1"]) == list(per_seed["2"]) == ["react", *MAIN]
    # the pooled difference is the mean of the seeds' (equal-sized) differences
    d = [per_seed[s]["countermem_top1"]["difference"]["mean"] for s in per_seed]
    assert arms["countermem_top1"]["difference"]["mean"] == pytest.approx(sum(d) / 3)
    # the report's rows: score and difference per arm, pooled and per seed
    xs = {(r["panel"], r["method"], r["x"]) for r in record["rows"]}
    assert ("a", "ReAct", "pooled") in xs and ("b", "ReAct+CounterMem (DQN)", "seed 2") in xs
    prov = record["pooled"]["provenance"]
    assert set(prov["seeds"]) == {"0", "1", "2"}
    assert all(s["store_hash"]["countermem_dqn"] for s in prov["seeds"].values())
    assert all(s["selector_fingerprints"]["countermem_dqn"] for s in prov["seeds"].values())


def test_the_pooled_table_prints_the_funnel_and_the_score_interval(replicated):
    record, _, _, _ = replicated
    text = replication.table(record["pooled"])
    assert "funnel, pooled over split and selector seeds" in text
    assert "decisions > " in text and "harmful" in text and "Tango score interval" in text
    assert "  seed 0: test-time checks against the reference " in text   # the oracle ablation


def test_pooled_difference_counts_reference_groups(replicated):
    record, bench, given, _ = replicated
    group_of = _group_ids(bench[0])
    assert len(set(group_of.values())) == len(set(_groups(bench[0]).values()))
    units = record["pooled"]["arms"]["countermem_dqn"]["units"]
    assert all(g == group_of[t] for _, t, g in units)
    # the bootstrap was handed the reference group of every pooled task, twins sharing one
    assert [group_of[t] for _, t, _ in units] in given
    twins = [t for _, t, _ in units if t.endswith("_twin")]
    assert twins and all(group_of[t] == group_of[t[:-len("_twin")]] for t in twins)
    assert record["pooled"]["arms"]["countermem_dqn"]["groups"] < len(units)


def test_each_seed_has_its_own_partition_with_groups_whole(replicated):
    _, bench, _, root = replicated
    group_of = _groups(bench[0])
    manifests = [json.loads((root / f"seed{r}" / "countermem_dqn" / "splits.json").read_text())
                 for r in range(3)]
    evals = [set(m["eval"]) for m in manifests]
    assert not (evals[0] & evals[1] or evals[0] & evals[2] or evals[1] & evals[2])
    assert len({tuple(m["build"]) for m in manifests}) == 3
    for m in manifests:
        eval_groups = {group_of[t] for t in m["eval"]}
        assert {t for t in group_of if group_of[t] in eval_groups} == set(m["eval"])
        rest = m["build"] + m["train"] + m["validation"]
        assert not {group_of[t] for t in rest} & eval_groups


def test_a_finished_replication_reruns_nothing(replicated):
    record, bench, _, root = replicated
    fake = scripted()
    # the study binary's path (runner.run_any -> protocols.run) with one backbone for all phases
    again = protocols.run(_small_study(root), root, backbone=fake, benchmark=bench)
    assert fake.calls == []
    assert again["pooled"]["arms"].keys() == record["pooled"]["arms"].keys()
    assert again["pooled"]["arms"]["countermem_dqn"]["difference"] == \
        record["pooled"]["arms"]["countermem_dqn"]["difference"]


def test_the_report_reads_the_replication(replicated, tmp_path):
    _, _, _, root = replicated
    written = build.write_report([str(root)], tmp_path / "report")
    assert "study_replication.csv" in written
    assert "replication" in written["report.md"].read_text()


def _decision(run, task, k, draft, action, success, record=None, label=0, **memory):
    return dict(run=run, task_id=task, decision=k, draft=draft, action=action,
                changed=draft != action, outcome={"success": success, "utility": float(success)},
                memory={"covered": record is not None, **({"record_id": record} if record else {}),
                        **memory}, reuse={"label": label} if record else {})


def _eval_logs(root, runs: dict):
    """``root/eval/<run>/log.jsonl`` with each run's decisions and a task_end per task."""
    from countermem_jax.runtime.runlog import RunLog
    for run, decisions in runs.items():
        log = RunLog(root / "eval" / run / "log.jsonl")
        for d in decisions:
            log.write("decision", **d)
        for task in dict.fromkeys(d["task_id"] for d in decisions):
            solved = any(d["outcome"]["success"] for d in decisions if d["task_id"] == task)
            log.write("task_end", run=run, task_id=task, solved=solved, calls=2, failures=1,
                      tokens=10)


def test_use_counts_judge_harm_against_react_at_the_same_decision(tmp_path):
    """ReAct solves t1 at its first decision; both selector seeds' record use there changes the
    draft to a failing action: two harmful uses (the reuse label says 0: nothing to compare
    with), a broken task, and a funnel summed over the two seeds."""
    base = [dict(_decision("base", "t1", 0, "A", "A", True), memory={}),
            dict(_decision("base", "t2", 0, "B", "B", False), memory={}),
            dict(_decision("base", "t2", 1, "B2", "B2", False), memory={})]
    seeds = {f"countermem-dqn-seed{s}": [
        _decision(f"countermem-dqn-seed{s}", "t1", 0, "A", "A'", False, "r1",
                  excluded_transfer=["r9"]),
        _decision(f"countermem-dqn-seed{s}", "t1", 1, "A", "A", True),
        _decision(f"countermem-dqn-seed{s}", "t2", 0, "B", "B", False, excluded_no_place=["r2"],
                  excluded_stale=["r3"], conditions={"compatible": 1, "incompatible": 2}),
        _decision(f"countermem-dqn-seed{s}", "t2", 1, "B2", "C", True, "r4", label=1)]
        for s in (0, 1)}
    _eval_logs(tmp_path, {"base": base, **seeds})
    entry = {"workdir": str(tmp_path), "per_task": {"base": {"t1": 1, "t2": 0}},
             "seeds": ["0", "1"]}
    counts = replication.memory_uses(entry)
    assert (counts["uses"], counts["harmful"], counts["changed"], counts["changed_right"]) == \
        (4, 2, 4, 2)
    f = counts["funnel"]
    assert (f["decisions"], f["failed_drafts"], f["with_candidate"], f["no_place"],
            f["refuted_by_transfer"], f["stale"], f["conditions_incompatible"], f["wrong"],
            f["checker_calls"]) == (8, 4, 4, 2, 2, 2, 4, 2, 8)


def test_rescued_and_broken_count_a_task_once_over_selector_seeds():
    """Two selector seeds that both break the same task: one broken task, not two."""
    summary = {"variants": {"countermem_dqn": {"per_task": {
        "base": {"t1": 1, "t2": 0, "t3": 0}, "0": {"t1": 0, "t2": 1, "t3": 0},
        "1": {"t1": 0, "t2": 0, "t3": 0}}}}}
    o = replication.arm_outcomes({0: summary}, "countermem_dqn", {"t1": "g1", "t2": "g2",
                                                                 "t3": "g3"})
    assert (o["rescued"], o["broken"]) == (1, 1)
    assert o["treated"] == [0.0, 50.0, 0.0]
