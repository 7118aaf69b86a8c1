"""The tuning pool and the report pool (protocol/pools.py, docs/ledger.md): the membership is the
rule fixed on 2026-11-27, the hash rule for a database no list names is the same in every
process, and every tuning script (the yield and operator benchmarks, the Spider calibration)
refuses a report-pool database, and the empty "every database", with one line before it reads
a question or loads a model; so does every phase (build_memory, train_selector, evaluate) unless
its config is one of the frozen replication's run configs (phases/report_pool.py)."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import types

import ml_collections
import pytest

from countermem_jax.protocol import pools
from helpers import config_module, cpu_config

ROOT = pathlib.Path(__file__).resolve().parents[1]

TUNING = ("car_1", "concert_singer", "course_teach", "employee_hire_evaluation", "museum_visit",
          "pets_1", "poker_player", "singer", "tvshow")
REPORT = ("cre_Doc_Template_Mgt", "network_1", "real_estate_properties",
          "student_transcripts_tracking")
# Spider dev databases the shipped copy lacks: where the hash rule puts them if they are added
HASHED = {"battle_death": "report", "dog_kennels": "report", "flight_2": "report",
          "orchestra": "tuning", "voter_1": "report", "world_1": "report", "wta_1": "tuning"}


def test_the_pools_are_the_rule_fixed_on_2026_11_27():
    assert pools.FIXED_ON == "2026-11-27"
    assert pools.tuning_pool() == TUNING and pools.report_pool() == REPORT
    assert all(pools.pool_of("spider", db) == "tuning" for db in TUNING)
    assert all(pools.pool_of("spider", db) == "report" for db in REPORT)


def test_every_shipped_database_is_in_one_pool_and_the_cpu_config_tunes(benchdata):
    shipped = sorted(p.name for p in (benchdata / "spider" / "database").iterdir() if p.is_dir())
    assert sorted(TUNING + REPORT) == shipped
    assert set(cpu_config("react").data.db_ids) <= set(TUNING)


def test_a_named_database_keeps_its_pool_whatever_its_hash_says():
    # the lists come first: these four would have gone the other way by their hash
    assert [pools._hash_pool(db) for db in ("concert_singer", "singer")] == ["report"] * 2
    assert pools._hash_pool("cre_Doc_Template_Mgt") == "tuning"
    assert pools.pool_of("spider", "singer") == "tuning"
    assert pools.pool_of("spider", "cre_Doc_Template_Mgt") == "report"


def test_the_hash_rule_is_the_same_in_every_process():
    assert {db: pools._hash_pool(db) for db in HASHED} == HASHED
    script = ("import json; from countermem_jax.protocol import pools; print(json.dumps("
              f"{{db: pools._hash_pool(db) for db in {sorted(HASHED)!r}}}))")
    for seed in ("1", "2"):  # Python's own str hash differs per process; the rule must not
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        assert json.loads(out.stdout) == HASHED


def test_databases_seen_outside_the_shipped_copy_tune_whatever_their_hash():
    # five of the six would be report by their hash; a run already read their outcomes
    for db in pools.SEEN_OUTSIDE_THE_SHIPPED_COPY["spider"]:
        assert pools.pool_of("spider", db) == "tuning"
    assert pools.pool_of("spider", "wta_1") == HASHED["wta_1"]


def test_the_report_questions_probes_read_are_named_and_in_the_report_pool():
    seen = pools.seen_before_fixing("spider")
    assert len(seen) == 21
    assert {task.split("/")[1] for task in seen} == set(REPORT)


@pytest.mark.parametrize("names", [("network_1",), ("pets_1", "student_transcripts_tracking")])
def test_require_tuning_pool_refuses_a_report_database_in_one_line(names):
    with pytest.raises(pools.PoolError, match="report pool") as err:
        pools.require_tuning_pool("spider", names, "probe")
    assert "\n" not in str(err.value) and names[-1] in str(err.value)
    pools.require_tuning_pool("spider", TUNING, "probe")   # the tuning pool passes


def test_require_tuning_pool_refuses_every_database():
    with pytest.raises(pools.PoolError, match="name the spider databases"):
        pools.require_tuning_pool("spider", (), "probe")


def test_the_yield_benchmark_draws_from_the_tuning_pool_and_refuses_the_report_pool(tmp_path):
    from benchmarks.tuning import record_yield as bench
    assert bench.cpu_config(tmp_path / "m.json").data.db_ids == TUNING
    for names in (("real_estate_properties",), ()):
        with pytest.raises(pools.PoolError):
            bench.cpu_config(tmp_path / "m.json", db_ids=names)


OPERATOR_PROBE = """
import json
from benchmarks.tuning import sql_operators as bench
from countermem_jax.protocol import pools
read = bench.sql_domain.spider_tasks
def no_read(*_):
    raise AssertionError("a question was read")
bench.sql_domain.spider_tasks = no_read
refused = []
for names in (("cre_Doc_Template_Mgt",), ()):
    try:
        bench.drawn_tasks(5, 0, names)
    except pools.PoolError:
        refused.append(list(names))
bench.sql_domain.spider_tasks = read
print(json.dumps({"refused": refused,
                  "drawn": sorted({t.environment for t in bench.drawn_tasks(40, 0)})}))
"""


def test_the_operator_benchmark_draws_from_the_tuning_pool_and_refuses_before_it_reads(
        benchdata):
    # in a process of its own: benchmarks/tuning/record_yield.py defines flags of the same names
    out = subprocess.run([sys.executable, "-c", OPERATOR_PROBE], capture_output=True, text=True,
                         check=True, timeout=120)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["refused"] == [["cre_Doc_Template_Mgt"], []]
    assert set(result["drawn"]) <= set(TUNING) and len(result["drawn"]) > 3


def test_the_spider_calibration_reads_the_tuning_pool_only(benchdata):
    from countermem_jax.data import calibrate
    empty, total = calibrate.empty_reference_tasks(benchdata / "spider")
    assert total == 397 and all(t.split("/")[1] in TUNING for t in empty)
    for names in (("network_1",), ()):
        with pytest.raises(pools.PoolError):
            calibrate.empty_reference_tasks(benchdata / "spider", names)


@pytest.mark.parametrize("command", [
    ["-m", "benchmarks.tuning.record_yield", "--db_ids=pets_1,network_1"],
    ["-m", "benchmarks.tuning.sql_operators", "--db_ids=student_transcripts_tracking"],
    ["-m", "benchmarks.tuning.record_yield", "--db_ids="],
])
def test_a_tuning_binary_refuses_a_report_database_in_one_line(command, tmp_path):
    workdir = tmp_path / "wd"
    run = subprocess.run([sys.executable, *command, f"--workdir={workdir}"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "report pool" in lines[0]
    assert not workdir.exists()   # nothing made, no model loaded


def test_the_calibrate_command_refuses_a_report_database(benchdata):
    run = subprocess.run([sys.executable, "-m", "countermem_jax.data", "calibrate", "spider",
                          f"--root={benchdata}", "--spider_db_ids=real_estate_properties"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stdout.strip().splitlines() == [run.stdout.strip()]
    assert "real_estate_properties is in the report pool" in run.stdout


# ----------------------------------------------------------------------------- the phases
def _frozen_run_configs():
    from countermem_jax.studies import replication, runner
    spec = importlib.util.spec_from_file_location(
        "replication_config", ROOT / "configs" / "studies" / "replication.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    study = module.get_config("cpu")
    return [c for r in range(study.protocol.split_seeds)
            for c in runner.variant_configs(replication.seed_study(study, r)).values()]


def _tasks(*databases):
    return [types.SimpleNamespace(environment=d) for d in databases]


def test_the_frozen_replications_run_configs_read_the_report_pool_and_nothing_else_does():
    from countermem_jax.phases import config_validation, report_pool
    configs = _frozen_run_configs()
    assert len(configs) == 3 * 2 + 2   # two arms per split seed, two ablations on seed 0
    for cfg in configs:
        report_pool.check(cfg, _tasks("network_1", "real_estate_properties"))
    changed = ml_collections.ConfigDict(configs[0].to_dict())
    changed.memory.top_k += 1
    with pytest.raises(config_validation.ConfigError) as err:
        report_pool.check(changed, _tasks("network_1"))
    assert "network_1 is in the report pool" in str(err.value)
    assert "memory.top_k" in str(err.value) and "\n" not in str(err.value)
    report_pool.check(changed, _tasks("pets_1"))   # the tuning pool: any config


def test_every_phase_refuses_the_report_pool_before_its_backbone(tmp_path):
    """build_memory, train_selector and evaluate all set up through ``context.setup``: the
    quickstart's config on a report-pool database is refused before a model is made."""
    from countermem_jax.phases import config_validation, context
    from countermem_jax.phases.workdir import Workdir
    cfg = cpu_config("react")
    cfg.backbone.model_path = "/nonexistent.gguf"
    with pytest.raises(config_validation.ConfigError, match="only the frozen replication"):
        context.setup(cfg, Workdir(tmp_path / "wd"), benchmark=(
            _tasks("student_transcripts_tracking"), None, None))


@pytest.mark.parametrize("db_ids", ["('pets_1','network_1')", "()"])
def test_build_memory_refuses_a_report_database_in_one_line(db_ids, tmp_path, benchdata):
    workdir = tmp_path / "wd"
    run = subprocess.run([sys.executable, "-m", "countermem_jax.build_memory",
                          "--config=configs/spider_react_cpu.py", f"--workdir={workdir}",
                          "--config.backbone.model_path=/nonexistent.gguf",
                          f"--config.data.db_ids={db_ids}"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert lines[-1].startswith("error: ") and "report pool" in lines[-1]
    assert "frozen replication" in lines[-1]
    assert ("data.db_ids=() loads every database" in lines[-1]) is (db_ids == "()")
    assert not (workdir / "fingerprint.json").exists()   # nothing of the refused run kept


def test_the_papers_settings_read_every_database_and_the_cpu_backbone_on_them_does_not():
    """The pools are the CPU setting's choices: the paper's Spider setting on gpt-oss reads the
    whole of Spider dev (report pool included); the same setting on the CPU model is refused."""
    from countermem_jax.phases import config_validation, report_pool
    cfg = config_module("paper.py").gptoss("spider", "react")
    report_pool.check(cfg, _tasks("network_1", "pets_1"))
    cfg.backbone.kind = "llama_cpp"
    with pytest.raises(config_validation.ConfigError, match="report pool"):
        report_pool.check(cfg, _tasks("network_1"))
