"""A workdir holds one config's results and one writer per phase."""
import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from countermem_jax.phases import config_fingerprint, config_validation, workdir_guard
from countermem_jax import experiment
from helpers import default_config
from countermem_jax.method.memory import load_frozen
from test_pipeline import _config, people_benchmark, scripted  # noqa: F401 (fixture)


# ----------------------------------------------------------------------------- fingerprint
def test_fingerprint_covers_result_fields_and_leaves_out_evaluation_choices():
    cfg = default_config()
    build = config_fingerprint.fingerprint_fields(cfg, "build_memory")
    for field in ("data.benchmark", "splits.n_build", "splits.n_eval", "agent.kind",
                  "agent.token_budget", "agent.max_attempts", "agent.temperature", "backbone.kind",
                  "backbone.model", "backbone.model_path", "backbone.reasoning_effort",
                  "memory.retention", "memory.capacity", "construction.k",
                  "construction.verification_budget", "construction.reuse_policy"):
        assert field in build, field
    for field in ("eval.selector", "eval.seeds", "eval.concurrency", "backbone.base_urls",
                  "backbone.max_concurrency", "backbone.cache_dir", "data.data_dir",
                  "splits.manifest", "selector.total_decisions"):
        assert field not in build, field
    train = config_fingerprint.fingerprint_fields(cfg, "train_selector")
    groups = ("dqn", "reward")
    assert set(train) == ({f"selector.{k}" for k in cfg.selector if k not in ("seeds", *groups)}
                          | {f"selector.{g}.{k}" for g in groups for k in cfg.selector[g]})


def test_a_new_field_is_fingerprinted_unless_listed_as_evaluation_only(monkeypatch):
    cfg = default_config()
    cfg.method = "countermem"
    cfg.eval.report_format = "table"
    fields = config_fingerprint.fingerprint_fields(cfg, "build_memory")
    assert fields["method"] == "countermem" and "eval.report_format" not in fields
    monkeypatch.setattr(config_fingerprint, "NOT_FINGERPRINTED",
                        config_fingerprint.NOT_FINGERPRINTED + ("method",))
    assert "method" not in config_fingerprint.fingerprint_fields(cfg, "build_memory")


def test_a_workdir_made_before_a_field_existed_matches_its_old_behaviour(tmp_path,
                                                                       people_benchmark):
    """A fingerprint recorded before ``construction.corrections`` existed was made by the
    verified method: the field reads as its ``BEFORE_THE_FIELD`` value, so the default still matches
    and the ablation value is a difference."""
    cfg = _config(tmp_path)
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    recorded = json.loads((wd / "fingerprint.json").read_text())
    for entry in recorded.values():
        entry.get("fields", {}).pop("construction.corrections", None)
    (wd / "fingerprint.json").write_text(json.dumps(recorded))
    experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    other = _config(tmp_path)
    other.construction.corrections = "unverified_advice"
    with pytest.raises(config_fingerprint.WorkdirMismatch, match="construction.corrections: "
                       "'verified' -> 'unverified_advice'"):
        experiment.evaluate(other, wd, backbone=scripted(), benchmark=people_benchmark)


def test_a_fingerprint_carries_its_version_and_another_version_is_refused_in_one_line(
        tmp_path, monkeypatch):
    """The same settings resume under the recorded version (also when the record predates the
    version field, version 1), other settings are refused; a record of another version is
    refused whatever the settings, in one line naming both versions."""
    cfg = default_config()
    cfg.eval.selector = "always_top1"
    _enter(cfg, tmp_path, "build_memory")
    path = tmp_path / "fingerprint.json"
    recorded = json.loads(path.read_text())
    assert recorded["build_memory"]["version"] == config_fingerprint.VERSION == 1
    del recorded["build_memory"]["version"]          # as written before the version existed
    path.write_text(json.dumps(recorded))
    _enter(cfg, tmp_path, "evaluate")
    changed = default_config()
    changed.eval.selector = "always_top1"
    changed.memory.top_k = 2
    with pytest.raises(config_fingerprint.WorkdirMismatch, match="memory.top_k: 3 -> 2"):
        _enter(changed, tmp_path, "evaluate")
    monkeypatch.setattr(config_fingerprint, "VERSION", 2)
    with pytest.raises(config_fingerprint.WorkdirMismatch) as err:
        _enter(cfg, tmp_path, "evaluate")
    message = str(err.value)
    assert "fingerprint version 1, this code reads version 2" in message and "\n" not in message


def test_reflexion_config_on_a_react_workdir_is_refused_naming_the_fields(tmp_path,
                                                                        people_benchmark):
    cfg = _config(tmp_path)
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    metrics = (wd / "metrics_always_top1.json").read_bytes()
    log = (wd / "log.jsonl").read_bytes()
    other = _config(tmp_path)
    other.agent.kind = "reflexion"
    other.agent.token_budget = 9999
    for phase in (experiment.evaluate, experiment.build_memory, experiment.train_selector):
        with pytest.raises(config_fingerprint.WorkdirMismatch) as err:
            phase(other, wd, backbone=scripted(), benchmark=people_benchmark)
        message = str(err.value)
        assert "agent.kind: 'react' -> 'reflexion'" in message
        assert "agent.token_budget: 20000 -> 9999" in message and "\n" not in message
    assert (wd / "metrics_always_top1.json").read_bytes() == metrics
    assert (wd / "log.jsonl").read_bytes() == log  # nothing was run under the wrong label
    # Evaluation-only choices are not refused: another fixed selector, more concurrency.
    again = _config(tmp_path, selector="always_skip")
    again.eval.concurrency = 4
    result = experiment.evaluate(again, wd, backbone=scripted(), benchmark=people_benchmark)
    assert "countermem-always_skip" in result["runs"]


def _enter(cfg, root, phase):
    with workdir_guard.enter_phase(cfg, root, phase):
        pass


def test_other_backbone_budget_or_selector_schedule_is_refused(tmp_path):
    cfg = default_config()
    _enter(cfg, tmp_path, "build_memory")
    _enter(cfg, tmp_path, "train_selector")
    for field, value in (("backbone.model", "other-model"), ("construction.k", 2),
                         ("memory.retention", "recency"), ("data.benchmark", "bird")):
        changed = default_config()
        section, key = field.split(".")
        changed[section][key] = value
        with pytest.raises(config_fingerprint.WorkdirMismatch, match=f"{field}: "):
            _enter(changed, tmp_path, "evaluate")
    trained = default_config()
    trained.selector.total_decisions = 10
    with pytest.raises(config_fingerprint.WorkdirMismatch, match="selector.total_decisions: 2000 -> 10"):
        _enter(trained, tmp_path, "evaluate")  # the DQN selector is evaluated
    trained.eval.selector = "always_top1"
    _enter(trained, tmp_path, "evaluate")  # a fixed selector does not use the trained one
    recorded = json.loads((tmp_path / "fingerprint.json").read_text())
    assert set(recorded) == {"build_memory", "train_selector"}
    assert recorded["build_memory"]["fields"]["agent.kind"] == "react"


def test_refused_split_sizes_take_the_fingerprint_back(tmp_path):
    cfg = default_config()
    with pytest.raises(config_validation.ConfigError):
        with workdir_guard.enter_phase(cfg, tmp_path, "build_memory"):
            raise config_validation.ConfigError("bad config: splits.n_build=60 but only 3 ...")
    assert not (tmp_path / "fingerprint.json").exists()
    smaller = default_config()
    smaller.splits.n_build = 3
    _enter(smaller, tmp_path, "build_memory")  # the corrected config is not "another config"


def test_workdir_with_results_but_no_fingerprint_is_refused(tmp_path):
    (tmp_path / "store.jsonl").write_text("")
    with pytest.raises(config_fingerprint.WorkdirMismatch, match="no fingerprint.json"):
        _enter(default_config(), tmp_path, "build_memory")


def test_unreadable_fingerprint_names_the_file(tmp_path):
    (tmp_path / "fingerprint.json").write_text("{broken")
    with pytest.raises(config_fingerprint.WorkdirMismatch, match=f"{tmp_path / 'fingerprint.json'}: "
                                                             "unreadable"):
        _enter(default_config(), tmp_path, "build_memory")


# ----------------------------------------------------------------------------- phase lock
HOLDER = """
import sys, pathlib, time
sys.path.insert(0, {tests!r})
import test_pipeline as tp
from countermem_jax import experiment
from benchmarks.testing.scripted_backbone import Rule
tmp = pathlib.Path({tmp!r})
tmp.mkdir(exist_ok=True)
go = tmp / "go"
def wait_then_draft(messages):
    while not go.exists():
        time.sleep(0.05)
    return tp._draft_for("b1")
fake = tp.scripted()
fake.rules.insert(0, Rule(wait_then_draft, template="DRAFT_ACTION", task="/b1#", times=1))
experiment.build_memory(tp._config(tmp), {workdir!r}, backbone=fake,
                        benchmark=tp.people_benchmark.__wrapped__(tmp))
"""


def _wait_for(path, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_two_concurrent_builds_one_is_refused_and_no_record_is_lost(tmp_path, people_benchmark):
    wd = tmp_path / "wd"
    holder_dir = tmp_path / "a"
    script = textwrap.dedent(HOLDER).format(tests=os.path.dirname(__file__),
                                            tmp=str(holder_dir), workdir=str(wd))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(wd / ".locks" / "build_memory.owner", proc)
        with pytest.raises(workdir_guard.WorkdirBusy) as err:
            experiment.build_memory(_config(tmp_path), wd, backbone=scripted(),
                                    benchmark=people_benchmark)
        assert str(err.value).startswith(f"workdir {wd}: phase build_memory is already running "
                                         f"(pid {proc.pid} on host {socket.gethostname()}")
        (holder_dir / "go").touch()
        out, errors = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, errors
    assert not (wd / ".locks" / "build_memory.owner").exists()
    experiment.build_memory(_config(tmp_path), tmp_path / "ref", backbone=scripted(),
                            benchmark=people_benchmark)
    ids = lambda d: [r.record_id for r in load_frozen(d / "store_frozen.jsonl").records]
    assert ids(wd) == ids(tmp_path / "ref") and ids(wd)
    # Once the holder is gone the phase can run again (here: finds the frozen store).
    again = experiment.build_memory(_config(tmp_path), wd, backbone=scripted(),
                                    benchmark=people_benchmark)
    assert again["records"] == len(ids(wd))


def test_phases_lock_separately_and_release_on_error(tmp_path):
    cfg = default_config()
    fixed = default_config()
    fixed.eval.selector = "always_top1"
    with workdir_guard.phase_lock(tmp_path, "train_selector", ("build_memory",)):
        _enter(fixed, tmp_path, "evaluate")  # a fixed selector reads nothing training writes
        with pytest.raises(workdir_guard.WorkdirBusy, match=f"pid {os.getpid()} on host"):
            _enter(cfg, tmp_path, "train_selector")
    with workdir_guard.phase_lock(tmp_path, "build_memory"):
        with pytest.raises(workdir_guard.WorkdirBusy, match=f"pid {os.getpid()} on host"):
            _enter(cfg, tmp_path, "build_memory")
    with pytest.raises(RuntimeError):
        with workdir_guard.enter_phase(cfg, tmp_path, "build_memory"):
            raise RuntimeError("phase crashed")
    _enter(cfg, tmp_path, "build_memory")  # the crashed phase released its lock
