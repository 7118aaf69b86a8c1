"""Retrieval excludes the records of the task's reference group in every phase (issue 36 item 4).

Spider's paraphrase twins share one gold query: a twin's verified record carries the task's own
reference answer as its corrected action. In Spider, construction task ``car_1/161`` and
selector-training task ``car_1/162`` are such twins.
"""
import dataclasses
import json
import pathlib

import helpers
import pytest

from countermem_jax import experiment
from countermem_jax.baselines.common import eligible
from countermem_jax.method.memory import MemoryRecord
from countermem_jax.method.memory.store import content_hash
from countermem_jax.method.memory_use import condition_query, judged_conditions
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.protocol import splits as splits_lib
from helpers import default_config
from countermem_jax.runtime.runlog import RunLog
from benchmarks.testing.scripted_backbone import ScriptedBackbone
from evaluators.grouping import group_id
from evaluators.sql import load_spider


@pytest.fixture(scope="module")
def car_twins(benchdata):
    """car_1/161 and car_1/162 (one gold query) and car_1/87, of another group."""
    tasks = {t.task_id: t for t in load_spider(benchdata / "spider", db_ids={"car_1"})}
    return tasks["spider/car_1/161"], tasks["spider/car_1/162"], tasks["spider/car_1/87"]


def _record_of(task, *, with_group=True, condition=""):
    record = helpers.make_record(source_task_id=task.task_id, condition=condition,
                                 situation=f"a correction learned on {task.prompt}",
                                 original="SELECT 1", improved=task.reference.gold_sql)
    return dataclasses.replace(record, source_group=group_id(task) if with_group else "")


def _query(task):
    """What a decision of ``task`` hands retrieval (``memory_use.condition_query``)."""
    return condition_query(task, "run")


def test_the_car_1_twins_share_one_reference_group(car_twins):
    a, b, other = car_twins
    assert group_id(a) == group_id(b) != group_id(other)
    assert a.reference.gold_sql != b.reference.gold_sql or a.prompt != b.prompt


@pytest.mark.parametrize("intervention", ["matched", "random", "shuffled"])
def test_a_twin_never_retrieves_the_record_its_twin_wrote(car_twins, intervention):
    source, twin, other = car_twins
    index = RetrievalIndex([_record_of(source)], intervention=intervention)
    seen = index.retrieve(_query(twin), "a question about cars")
    assert seen.candidates == () and seen.excluded_same_task == (_record_of(source).record_id,)
    assert seen.eligible_count == 0
    assert [c.record.source_task_id for c in index.retrieve(_query(other)).candidates] == \
        [source.task_id]


def test_a_record_stored_without_a_group_is_resolved_through_the_task_pool(car_twins):
    """Stores written before the field: the pool's group of the source task decides."""
    source, twin, other = car_twins
    old = _record_of(source, with_group=False)
    pool = splits_lib.reference_groups(car_twins)
    assert pool[source.task_id] == pool[twin.task_id] == group_id(source)
    assert RetrievalIndex([old], groups=pool).retrieve(_query(twin)).candidates == ()
    assert RetrievalIndex([old], groups=pool).retrieve(_query(other)).candidates
    without_group = dataclasses.replace(_query(twin), group="")   # neither side knows it
    assert RetrievalIndex([old]).retrieve(without_group).candidates
    # its own task is excluded with or without the pool
    assert RetrievalIndex([old]).retrieve(_query(source)).candidates == ()
    assert RetrievalIndex([_record_of(source)]).retrieve(_query(source)).candidates == ()


def test_the_pool_group_wins_over_a_stale_stored_one(car_twins):
    """A record built under another grouping rule still stays away from today's twins."""
    source, twin, _ = car_twins
    stale = dataclasses.replace(_record_of(source), source_group="grouped-otherwise")
    pool = splits_lib.reference_groups(car_twins)
    assert RetrievalIndex([stale], groups=pool).retrieve(_query(twin)).candidates == ()


def test_the_twins_conditions_are_not_judged_for_it(car_twins):
    source, twin, other = car_twins
    index = RetrievalIndex([_record_of(source, condition="the question asks about cars")])
    assert judged_conditions(index, twin.task_id, group_id(twin)) == ()
    assert judged_conditions(index, other.task_id, group_id(other)) == (
        "the question asks about cars",)


def test_the_group_field_round_trips_and_old_records_keep_their_hash(car_twins):
    source = car_twins[0]
    new = _record_of(source)
    assert MemoryRecord.from_json(json.loads(new.json_text(False))) == new
    old = _record_of(source, with_group=False)
    assert "source_group" not in old.to_json()
    assert MemoryRecord.from_json(old.to_json()) == old
    # the hash of a store written before the field is what it was
    legacy = {k: v for k, v in new.to_json().items() if k != "source_group"}
    assert content_hash(helpers.paper("store"), [MemoryRecord.from_json(legacy)]) == \
        content_hash(helpers.paper("store"), [old])


def test_baseline_items_written_by_a_twin_are_not_shown(car_twins):
    source, twin, other = car_twins
    items = [{"item_id": "i1", "source_task_ids": [source.task_id]}]
    groups = splits_lib.reference_groups(car_twins)
    assert eligible(items, twin.task_id, groups) == ([], ["i1"])
    assert eligible(items, other.task_id, groups) == (items, [])


@pytest.mark.parametrize("grouped", [True, False])
def test_splits_carry_every_split_tasks_reference_group(car_twins, grouped):
    sp = splits_lib.make_splits(car_twins, 2, 1, 0, 1, group_by_reference=grouped)
    used = [t for part in splits_lib.PARTS for t in getattr(sp, part)]
    assert dict(sp.groups) == splits_lib.reference_groups(used)
    again = splits_lib.from_manifest(car_twins, sp.manifest(), group_by_reference=grouped)
    assert again.groups == sp.groups


# --- every phase, end to end on the real SQL checker -------------------------------------------
# b1 stores the record; its twins (one gold query, other wording) sit in every split, each beside
# a task of another group that shows retrieval works in that phase.
TWINS = {"b1": "List the names of people aged at least 30.",
         "b2": "Which people are aged at least 30? Names only.",
         "t1": "Give the names of people who are at least 30.",
         "v1": "Names of the people aged 30 or more.",
         "e1": "Who is at least 30 years old? List the names."}
OTHERS = {"b3": ("List the names of people aged at least 50.", ">= 50"),
          "t2": ("Names of people who are at least 35.", ">= 35"),
          "v2": ("Give the names of people aged at least 55.", ">= 55"),
          "e2": ("Which people are at least 40 years old? Give their names.", ">= 40")}
MANIFEST = {"build": ["b1", "b2", "b3"], "train": ["t1", "t2"], "validation": ["v1", "v2"],
            "eval": ["e1", "e2"]}


def _scripted():
    fake = ScriptedBackbone()
    golds = {**{t: ">= 30" for t in TWINS}, **{t: g for t, (_, g) in OTHERS.items()}}
    for tid, gold in golds.items():
        fake.add(f"```sql\nSELECT name FROM people WHERE age {gold.replace('>=', '>')}\n```",
                 template="DRAFT_ACTION", task=f"/{tid}#")
    fake.add(lambda m: "EDIT 1\nFIND: age >\nREPLACE: age >=",
             template="GENERATE_LOCAL_ALTERNATIVES")
    fake.add("SITUATION: an inclusive 'at least' threshold was written as a strict comparison\n"
             "CONDITION: bound == inclusive", template="DISTIL_RECORD")
    fake.add(lambda m: "```sql\n" + m[-1]["content"].split("Your draft action:\n```\n")[1]
             .split("\n```")[0].replace("age > ", "age >= ") + "\n```",
             template="REVISE_WITH_RECORD")
    return fake


def test_no_phase_retrieves_a_record_of_the_tasks_reference_group(tmp_path):
    questions = {**{t: (q, ">= 30") for t, q in TWINS.items()}, **OTHERS}
    benchmark = helpers.people_benchmark(tmp_path, questions)
    cfg = default_config()
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    cfg.splits.manifest = str(tmp_path / "manifest.json")
    cfg.agent.max_attempts = 2
    cfg.selector.update(total_decisions=6, learning_starts=1, train_every=1, target_sync_every=2,
                        checkpoint_every=3, batch_size=2, seeds=(0,))
    cfg.eval.selector = "always_top1"
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=_scripted(), benchmark=benchmark)
    experiment.train_selector(cfg, wd, backbone=_scripted(), benchmark=benchmark)
    experiment.evaluate(cfg, wd, backbone=_scripted(), benchmark=benchmark)
    sources = {}
    for line in (wd / "store_frozen.jsonl").read_text().splitlines()[1:]:
        record = json.loads(line)
        sources[record["record_id"]] = record["source_task_id"]
    assert "b1" in sources.values()
    decisions = [d for path in sorted(pathlib.Path(wd).rglob("log.jsonl"))
                 for d in RunLog(path).events("decision") if d.get("memory")]
    twin_seen, twin_excluded, other_seen = set(), set(), set()
    for d in decisions:
        retrieved = {sources.get(r["record_id"]) for r in d["memory"]["retrieved"]}
        excluded = {sources.get(r) for r in d["memory"]["excluded_same_task"]}
        if d["task_id"] in TWINS:
            twin_seen |= {d["task_id"]} if retrieved & set(TWINS) else set()
            twin_excluded |= {d["task_id"]} if "b1" in excluded else set()
        elif retrieved & set(TWINS):
            other_seen.add(d["task_id"])
    assert twin_seen == set()                                   # no phase, no twin
    assert twin_excluded >= {"b2", "t1", "v1", "e1"}            # construction to evaluation
    assert other_seen >= {"b3", "t2", "e2"}                     # retrieval works beside them
