"""Splits that cannot leak a twin's answer, drawn as Appendix D.2 says."""
import json
import random
import subprocess
import sys

import pytest

from countermem_jax import experiment
from countermem_jax.protocol import splits as splits_lib
from countermem_jax.phases import context
from benchmarks.testing.scripted_backbone import ScriptedBackbone as FakeBackbone
from helpers import default_config
from evaluators import grouping
from evaluators.base import Task
from evaluators.coding.checker import RepoReference
from evaluators.sat.loaders import encoding_tasks as sat_encoding_tasks
from evaluators.sql.checker import SQLReference


def _sql(task_id, db, gold, question="q"):
    return Task(task_id, "sql", "spider", question, "", "u", environment=db,
                reference=SQLReference(gold, f"/nowhere/{db}.sqlite", "spider"))


def _pool(n=200, dbs=5):
    """Every question has a paraphrase twin with the same gold query (written differently)."""
    tasks = []
    for i in range(n // 2):
        db = f"db{i % dbs}"
        tasks.append(_sql(f"{db}/{2 * i}", db, f"SELECT name FROM t{i} WHERE age > {i}"))
        tasks.append(_sql(f"{db}/{2 * i + 1}", db, f"select  NAME from T{i}\n where AGE>{i};"))
    return tasks


def _groups_crossing(sp):
    key = lambda t: grouping.group_key(t)
    rest = {key(t) for t in sp.build + sp.train + sp.validation}
    return {key(t) for t in sp.eval} & rest


def test_sql_group_key_normalizes_the_gold_query_per_database():
    a = _sql("a", "db", "SELECT T1.name FROM singer AS T1 WHERE T1.age  >  30")
    b = _sql("b", "db", "select t1.NAME from SINGER as t1 where t1.AGE > 30;")
    c = _sql("c", "other", "SELECT T1.name FROM singer AS T1 WHERE T1.age > 30")
    d = _sql("d", "db", "SELECT T1.name FROM singer AS T1 WHERE T1.age >= 30")
    assert grouping.group_key(a) == grouping.group_key(b)
    assert len({grouping.group_key(t) for t in (a, c, d)}) == 3


def test_twins_stay_in_one_split_and_grouping_can_be_turned_off():
    tasks = _pool()
    sp = splits_lib.make_splits(tasks, 60, 50, 5, 40)
    assert not _groups_crossing(sp)
    assert sp.info["groups"] == 100 and sp.info["tasks_sharing_a_group"] == 200
    assert sp.manifest()["groups"] == 100 and sp.manifest()["grouping"] == "reference"
    ungrouped = splits_lib.make_splits(tasks, 60, 50, 5, 40, group_by_reference=False)
    assert _groups_crossing(ungrouped)  # what disjointness by task id alone lets through
    assert ungrouped.info["groups"] == 200


def test_evaluation_and_construction_are_drawn_as_appendix_d2_says():
    tasks = _pool()
    sp = splits_lib.make_splits(tasks, 60, 50, 5, 40, group_by_reference=False)
    pool = sorted(tasks, key=lambda t: t.task_id)
    expected_eval = random.Random(12345).sample(pool, 40)
    assert [t.task_id for t in sp.eval] == [t.task_id for t in expected_eval]
    drawn = random.Random(12345 + 8675309).sample(pool, 60)
    eval_ids = {t.task_id for t in expected_eval}
    assert [t.task_id for t in sp.build] == [t.task_id for t in drawn if t.task_id not in eval_ids]
    assert sp.info["build_drawn"] == 60
    assert sp.info["build_removed_shared_with_eval"] == 60 - len(sp.build) > 0


def test_database_separated_split_takes_explicit_counts():
    tasks = _pool(200, dbs=10)
    sp = splits_lib.make_splits(tasks, 30, 20, 5, 20, separate_environments=True,
                                n_build_envs=4, n_eval_envs=3)
    eval_envs = {t.environment for t in sp.eval}
    other_envs = {t.environment for t in sp.build + sp.train + sp.validation}
    assert not eval_envs & other_envs
    assert len(sp.info["environments"]["eval"]) == 3 and len(sp.info["environments"]["build"]) == 4
    assert eval_envs <= set(sp.info["environments"]["eval"])
    assert other_envs <= set(sp.info["environments"]["build"])
    with pytest.raises(splits_lib.SplitError, match="only 10; .*35 / 34"):
        splits_lib.make_splits(tasks, 30, 20, 5, 20, separate_environments=True,
                               n_build_envs=35, n_eval_envs=34)
    with pytest.raises(splits_lib.SplitError, match="explicit environment counts"):
        splits_lib.make_splits(tasks, 30, 20, 5, 20, separate_environments=True)


def test_group_keys_for_other_domains():
    repo = lambda files: RepoReference("/r", ("t.py",), ("t::a",), (), files)
    same = [Task(f"c{i}", "coding", "quixbugs", "p", "", "u", reference=repo(("gcd.py",)))
            for i in range(2)]
    other = Task("c3", "coding", "quixbugs", "p", "", "u", reference=repo(("lcs.py",)))
    assert grouping.group_key(same[0]) == grouping.group_key(same[1]) != grouping.group_key(other)
    sat = sat_encoding_tasks(None, generated_per_family=2)
    again = sat_encoding_tasks(None, generated_per_family=2, seed=0)
    assert len({grouping.group_key(t) for t in sat}) == len(sat)
    assert [grouping.group_key(t) for t in sat] == [grouping.group_key(t) for t in again]
    assert grouping.group_key(Task("x", "vision", "b", "p", "", "u")) == "task:x"


def test_recorded_splits_without_the_new_fields_still_load(tmp_path):
    tasks = _pool(40)
    cfg = default_config()
    cfg.splits.update(n_build=10, n_train=5, n_validation=2, n_eval=6)
    wd = experiment.Workdir(tmp_path / "wd")
    sp = context.setup(cfg, wd, FakeBackbone(), (tasks, None, None)).splits
    recorded = json.loads(wd.splits.read_text())
    assert recorded["groups"] == 20 and recorded["grouping"] == "reference"
    old_style = {name: recorded[name] for name in splits_lib.PARTS}  # a pre-grouping splits.json
    wd.splits.write_text(json.dumps(old_style))
    assert context.setup(cfg, wd, FakeBackbone(), (tasks, None, None)).splits.eval == sp.eval
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(old_style))
    cfg.splits.manifest = str(manifest)
    assert splits_lib.from_manifest(tasks, old_style).info["groups_across_splits"] == 0
    cfg.splits.update(manifest="", n_eval=8)
    with pytest.raises(experiment.PhaseError, match="splits differ"):
        context.setup(cfg, wd, FakeBackbone(), (tasks, None, None))


def test_a_manifest_that_splits_twins_is_reported():
    tasks = _pool(10)
    ids = sorted(t.task_id for t in tasks)
    manifest = {"build": ids[0:1], "train": [], "validation": [], "eval": ids[1:2]}
    assert ids[0].endswith("/0") and ids[1].endswith("/1")  # twins 0 and 1
    assert splits_lib.from_manifest(tasks, manifest).info["groups_across_splits"] == 1


def test_too_many_databases_is_one_clear_line(tmp_path, benchdata):
    out = subprocess.run(
        [sys.executable, "-m", "countermem_jax.build_memory", "--config=configs/spider_react_cpu.py",
         f"--workdir={tmp_path / 'wd'}", "--config.splits.separate_environments=True"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith("error: asked for 35 construction + 34")
    assert "Traceback" not in out.stderr and not (tmp_path / "wd" / "splits.json").exists()


def test_spider_dev_twins_are_grouped(benchdata):
    from evaluators.sql.loaders import load_spider
    tasks = load_spider(benchdata / "spider", "dev")
    sp = splits_lib.make_splits(tasks, 60, 200, 20, 40)
    assert not _groups_crossing(sp)
    shared = sp.info["tasks_sharing_a_group"]
    print(f"spider dev: {len(tasks)} questions, {sp.info['groups']} groups, {shared} share theirs")
    assert shared > len(tasks) // 2


def test_dafnybench_tasks_do_not_carry_the_ground_truth_path(benchdata):
    from evaluators.formal.loaders import load_dafnybench
    tasks = load_dafnybench(benchdata / "dafnybench/DafnyBench/dataset", limit=20)
    assert tasks
    for task in tasks:
        visible = json.dumps([task.prompt, task.context, dict(task.features), task.environment])
        assert "ground_truth" not in visible and "ground_truth" not in repr(task.reference)
