"""CounterMem end to end with the scripted backbone and the real SQL checker (paper Alg. 1)."""
import json
import re

import helpers
import pytest

from countermem_jax import experiment
from countermem_jax.protocol import splits as splits_lib
from benchmarks.testing.scripted_backbone import Rule, ScriptedBackbone
from helpers import default_config
from countermem_jax.method.memory import load_frozen, load_store
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.method.selector import checkpoint
from evaluators.base import Task

QUESTIONS = {
    "b1": ("List the names of people aged at least 30.", ">= 30", "> 30"),
    "b2": ("List the names of people aged at least 50.", ">= 50", "> 50"),
    "t1": ("Names of people aged at least 45.", ">= 45", "> 45"),
    "t2": ("Names of people who are at least 35.", ">= 35", "> 35"),
    "v1": ("Give the names of people aged at least 55.", ">= 55", "> 55"),
    "e1": ("Which people are at least 40 years old? Give their names.", ">= 40", "> 40"),
    "e2": ("Which people are strictly above 40 years old? Give their names.", "> 40", "> 40"),
}
MANIFEST = {"build": ["b1", "b2"], "train": ["t1", "t2"], "validation": ["v1"],
            "eval": ["e1", "e2"]}


@pytest.fixture
def people_benchmark(tmp_path):
    return helpers.people_benchmark(tmp_path,
                                    {t: (q, gold) for t, (q, gold, _) in QUESTIONS.items()})


def _draft_for(task_id):
    return f"```sql\nSELECT name FROM people WHERE age {QUESTIONS[task_id][2]}\n```"


def _revise(messages):
    draft = re.search(r"Your draft action:\n```\n(.*?)\n```", messages[-1]["content"], re.S).group(1)
    return "```sql\n" + draft.replace("age > ", "age >= ") + "\n```"


def scripted():
    fake = ScriptedBackbone()
    for tid in QUESTIONS:
        fake.add(_draft_for(tid), template="DRAFT_ACTION", task=f"/{tid}#")
    fake.add(lambda m: "EDIT 1\nFIND: age > " + re.search(r"age > (\d+)", m[-1]["content"]).group(1)
             + "\nREPLACE: age >= " + re.search(r"age > (\d+)", m[-1]["content"]).group(1),
             template="GENERATE_LOCAL_ALTERNATIVES")
    fake.add("SITUATION: an inclusive 'at least' threshold was written as a strict comparison\n"
             "CONDITION: bound == inclusive", template="DISTIL_RECORD")
    fake.add(_revise, template="REVISE_WITH_RECORD")
    return fake


def _config(tmp_path, selector="always_top1"):
    c = default_config()
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    c.splits.manifest = str(tmp_path / "manifest.json")
    c.agent.max_attempts = 2
    c.selector.update(total_decisions=6, learning_starts=1, train_every=1, target_sync_every=2,
                      checkpoint_every=3, batch_size=2, seeds=(0, 1))
    c.eval.selector = selector
    return c


def test_failed_draft_produces_a_verified_record(tmp_path, people_benchmark):
    experiment.build_memory(_config(tmp_path), tmp_path / "wd", backbone=scripted(),
                            benchmark=people_benchmark)
    store = load_frozen(tmp_path / "wd" / "store_frozen.jsonl")
    assert len(store) == 1  # b2 reused b1's record during construction and was solved
    record = store.records[0]
    assert record.source_task_id == "b1"
    assert record.original_action == "SELECT name FROM people WHERE age > 30"
    assert record.improved_action == "SELECT name FROM people WHERE age >= 30"
    assert record.evidence.original.utility == 0.0 and record.evidence.improved.success
    assert record.condition == "bound == inclusive" and record.delta == 1.0
    assert record.provenance.evaluator == "sqlite-exec"
    # The reuse on b2 changed the action and solved the task: y = +1, u = 0.3 · 1.
    assert (record.uses, record.helpful_uses) == (1, 1) and record.reuse_utility == pytest.approx(0.3)


def test_contract_violations_go_to_the_workdirs_parse_failure_log(tmp_path, people_benchmark):
    """The phase hands its agents the workdir's ParseFailureLog (Appendix D.8): a distillation
    reply without its fields is logged there, and the repair round still yields the record."""
    fake = scripted()
    fake.rules.insert(0, Rule("I would rather not say.", template="DISTIL_RECORD", times=1))
    experiment.build_memory(_config(tmp_path), tmp_path / "wd", backbone=fake,
                            benchmark=people_benchmark)
    logged = [json.loads(line) for line in
              (tmp_path / "wd" / "parse_failures.jsonl").read_text().splitlines()]
    assert [(f["template"], f["attempt"]) for f in logged] == [("DISTIL_RECORD", 1)]
    assert "/b1#" in logged[0]["decision"]
    assert len(load_frozen(tmp_path / "wd" / "store_frozen.jsonl")) == 1


def test_task_never_sees_its_own_records(tmp_path, people_benchmark):
    experiment.build_memory(_config(tmp_path), tmp_path / "wd", backbone=scripted(),
                            benchmark=people_benchmark)
    log = RunLog(tmp_path / "wd" / "log.jsonl")
    own = {r.record_id: r.source_task_id
           for r in load_frozen(tmp_path / "wd" / "store_frozen.jsonl").records}
    seen_own = excluded_own = 0
    for d in log.events("decision"):
        retrieved = {r["record_id"] for r in d["memory"]["retrieved"]}
        seen_own += any(own.get(rid) == d["task_id"] for rid in retrieved)
        excluded_own += any(own.get(rid) == d["task_id"] for rid in d["memory"]["excluded_same_task"])
    assert seen_own == 0 and excluded_own >= 1  # b1's second attempt had its own record excluded


def test_later_task_applies_the_record_and_look_alike_filters_it(tmp_path, people_benchmark):
    cfg = _config(tmp_path)
    experiment.build_memory(cfg, tmp_path / "wd", backbone=scripted(), benchmark=people_benchmark)
    result = experiment.evaluate(cfg, tmp_path / "wd", backbone=scripted(), benchmark=people_benchmark)
    run = "countermem-always_top1"  # a fixed selector gets its own run (and run directory)
    base_log = RunLog(tmp_path / "wd" / "eval" / "base" / "log.jsonl")
    log = RunLog(tmp_path / "wd" / "eval" / run / "log.jsonl")
    ends = {(e["run"], e["task_id"]): e
            for e in base_log.events("task_end") + log.events("task_end")}
    assert set(result["runs"]) == {"base", run}
    assert not ends[("base", "e1")]["solved"] and ends[(run, "e1")]["solved"]
    e1 = next(d for d in log.events("decision") if d["run"] == run and d["task_id"] == "e1")
    assert e1["memory"]["record_id"] and e1["action"].endswith("age >= 40")
    assert e1["reuse"]["label"] == 1
    e2 = [d for d in log.events("decision") if d["run"] == run and d["task_id"] == "e2"]
    assert e2[0]["memory"]["retrieved"] == [] and len(e2[0]["memory"]["excluded_condition"]) == 1
    assert ends[(run, "e2")]["solved"]  # its correct strict draft was left alone
    assert (tmp_path / "wd" / "metrics_always_top1.json").exists()
    assert result["paired"] == {"fixed": {"paired_tasks": 2, "rescued": 1, "broken": 0, "net": 1}}
    assert result["countermem"]["retrieval_coverage"] == 0.5
    assert result["countermem"]["harmful_use_rate"] == 0.0


def test_replayed_revision_rescues_without_asking_the_model(tmp_path, people_benchmark):
    """memory.revision=replay (§3.4, the CPU configs): the chosen record's checked edit is made
    on the draft where it fits (``age > 40`` → ``age >= 40``), with no REVISE_WITH_RECORD call;
    the look-alike's strict question is still filtered by the condition."""
    cfg = _config(tmp_path)
    cfg.memory.revision = "replay"
    fake = scripted()
    fake.rules = [r for r in fake.rules if r.template != "REVISE_WITH_RECORD"]  # would raise
    experiment.build_memory(cfg, tmp_path / "wd", backbone=fake, benchmark=people_benchmark)
    result = experiment.evaluate(cfg, tmp_path / "wd", backbone=fake, benchmark=people_benchmark)
    assert result["paired"] == {"fixed": {"paired_tasks": 2, "rescued": 1, "broken": 0, "net": 1}}
    log = RunLog(tmp_path / "wd" / "eval" / "countermem-always_top1" / "log.jsonl")
    e1 = next(d for d in log.events("decision") if d["task_id"] == "e1" and d["memory"]["retrieved"])
    assert e1["memory"]["revision"] == "replay" and e1["action"].endswith("age >= 40")
    assert not any(charge.purpose == "REVISE_WITH_RECORD" for charge, _ in fake.calls)
    # construction's reuse on b2 was a replay too, and helped (y = +1)
    record = load_frozen(tmp_path / "wd" / "store_frozen.jsonl").records[0]
    assert (record.uses, record.helpful_uses) == (1, 1)


def test_training_and_evaluation_leave_store_and_selector_unchanged(tmp_path, people_benchmark):
    cfg = _config(tmp_path, selector="dqn")
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    summary = experiment.train_selector(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    assert all(summary["seeds"][s]["decisions"] >= 6 for s in ("0", "1"))
    frozen_bytes = (wd / "store_frozen.jsonl").read_bytes()
    ckpt_files = {p: p.read_bytes() for p in (wd / "selector").rglob("*") if p.is_file()}
    result = experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    assert (wd / "store_frozen.jsonl").read_bytes() == frozen_bytes
    assert {p: p.read_bytes() for p in (wd / "selector").rglob("*") if p.is_file()} == ckpt_files
    assert result["verified_unchanged"]["store_hash"] == load_frozen(wd / "store_frozen.jsonl").content_hash()
    assert {"selector_checkpoint_seed0", "selector_checkpoint_seed1"} <= \
        set(result["verified_unchanged"])
    transitions = RunLog(wd / "log.jsonl").events("transition")
    assert transitions and all(len(t["obs"]) == 98 for t in transitions)
    # A checkpoint changed after training is refused before evaluation starts.
    best = json.loads((wd / "selector" / "fingerprints.json").read_text())["0"]["step"]
    victim = next(p for p in (wd / "selector" / "seed_0" / str(best)).rglob("*") if p.is_file())
    victim.write_bytes(victim.read_bytes() + b" ")
    with pytest.raises((experiment.PhaseError, checkpoint.CheckpointIntegrityError),
                       match="not the one training recorded|content changed since it was saved"):
        experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)


def test_tampered_store_is_refused(tmp_path, people_benchmark):
    cfg = _config(tmp_path)
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    (wd / "store_frozen.sha256").write_text("0" * 64 + "\n")
    with pytest.raises(Exception, match="differs from the expected"):
        experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)


def test_overlapping_splits_are_refused(tmp_path, people_benchmark):
    cfg = _config(tmp_path)
    bad = dict(MANIFEST, eval=["e1", "b1"])
    (tmp_path / "manifest.json").write_text(json.dumps(bad))
    with pytest.raises(splits_lib.SplitError, match="also appear in construction"):
        experiment.build_memory(cfg, tmp_path / "wd", backbone=scripted(), benchmark=people_benchmark)


class _Crash(RuntimeError):
    pass


def test_interrupted_build_resumes_to_the_same_store(tmp_path, people_benchmark):
    cfg = _config(tmp_path)
    experiment.build_memory(cfg, tmp_path / "ref", backbone=scripted(), benchmark=people_benchmark)
    reference = load_frozen(tmp_path / "ref" / "store_frozen.jsonl")

    crashing = scripted()
    crashing.rules.insert(0, _crash_rule())
    with pytest.raises(_Crash):
        experiment.build_memory(cfg, tmp_path / "wd", backbone=crashing, benchmark=people_benchmark)
    partial = load_store(tmp_path / "wd" / "store.jsonl")
    assert partial.meta["processed_tasks"] == ["b1"] and len(partial) == 1
    assert partial.records[0].uses == 0  # b2's unfinished reuse was not saved
    experiment.build_memory(cfg, tmp_path / "wd", backbone=scripted(), benchmark=people_benchmark)
    resumed = load_frozen(tmp_path / "wd" / "store_frozen.jsonl")
    key = lambda s: [(r.record_id, r.reuse_utility, r.uses, r.admission_score) for r in s.records]
    assert key(resumed) == key(reference)
    ends = [e for e in RunLog(tmp_path / "wd" / "log.jsonl").events("task_end")]
    assert [e["task_id"] for e in ends] == ["b1", "b2"]  # b1 was not redone


def _crash_rule():
    def boom(messages):
        raise _Crash("killed during b2")
    return Rule(boom, task="/b2#")


def test_sql_split_follows_the_paper_seeds():
    tasks = [Task(f"db{i % 5}/{i}", "sql", "spider", "q", "", "u", environment=f"db{i % 5}")
             for i in range(200)]
    sp = splits_lib.make_splits(tasks, 60, 50, 5, 40)
    assert len(sp.eval) == 40 and not {t.task_id for t in sp.eval} & {t.task_id for t in sp.build}
    again = splits_lib.make_splits(tasks, 60, 50, 5, 40)
    assert [t.task_id for t in again.eval] == [t.task_id for t in sp.eval]
    separated = splits_lib.make_splits(tasks, 30, 20, 5, 20, separate_environments=True,
                                       n_build_envs=3, n_eval_envs=2)
    assert not ({t.environment for t in separated.eval} &
                {t.environment for t in separated.build + separated.train})


def test_reflexion_writes_reflections_and_uses_them_in_later_attempts(people_benchmark):
    import asyncio
    from countermem_jax.method.agents import Agent, Augmentation
    tasks, evaluator, domain = people_benchmark
    fake = scripted()
    fake.rules.insert(0, Rule(
        "REFLECTION: 'at least' includes the boundary, so use >=", template="REFLEXION_REFLECT"))
    agent = Agent(fake, evaluator, domain, helpers.agent_config(kind="reflexion", max_attempts=2))
    ctx = asyncio.run(agent.run(tasks[0], Augmentation(), phase="evaluation", run="base"))
    assert ctx.reflections == ["'at least' includes the boundary, so use >="]
    drafts = [m for c, m in fake.calls if c.purpose == "DRAFT_ACTION"]
    assert len(drafts) == 2 and "includes the boundary" in drafts[1][-1]["content"]
    assert "Checker feedback" in drafts[1][-1]["content"]
    assert ctx.calls == 2 and ctx.failures == 2 and ctx.tokens > 0


def test_decisions_of_a_killed_task_are_not_counted_twice(tmp_path):
    log = RunLog(tmp_path / "log.jsonl")
    log.write("decision", run="countermem", task_id="a", decision=0, memory={"covered": True})
    log.write("decision", run="countermem", task_id="a", decision=0, memory={"covered": False})
    log.write("decision", run="countermem", task_id="a", decision=1, memory={"covered": True})
    log.write("task_end", run="countermem", task_id="a", solved=True)
    log.write("decision", run="countermem", task_id="b", decision=0, memory={})
    done = log.completed_decisions("countermem")
    assert [d["memory"]["covered"] for d in done] == [False, True]


def test_verified_correction_survives_a_broken_distillation(tmp_path, people_benchmark):
    fake = scripted()
    fake.rules.insert(0, Rule(
        "I think the query was wrong somehow.", template="DISTIL_RECORD"))
    experiment.build_memory(_config(tmp_path), tmp_path / "wd", backbone=fake,
                            benchmark=people_benchmark)
    record = load_frozen(tmp_path / "wd" / "store_frozen.jsonl").records[0]
    # the condition comes from what the verified edit touched, not the whole database
    assert record.condition == "environment == people AND edit touches [age]"
    assert "- > + >=" in record.situation
    cf = [e for e in RunLog(tmp_path / "wd" / "log.jsonl").events("counterfactual") if e.get("admitted")]
    assert cf and cf[0]["distil_fallback"] is True


def test_free_text_conditions_can_be_scoped_to_the_edit(tmp_path, people_benchmark):
    fake = scripted()
    fake.rules.insert(0, Rule(
        "SITUATION: strict comparison for an inclusive request\nCONDITION: the question says at least",
        template="DISTIL_RECORD"))
    cfg = _config(tmp_path)
    cfg.construction.scope_free_text_conditions = True
    experiment.build_memory(cfg, tmp_path / "wd", backbone=fake, benchmark=people_benchmark)
    record = load_frozen(tmp_path / "wd" / "store_frozen.jsonl").records[0]
    assert record.condition == "environment == people AND edit touches [age]"
    assert "[stated condition: the question says at least]" in record.situation
