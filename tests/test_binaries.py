"""The absl binaries: inspect_store output and errors, required flags of the phase binaries, and
one-line refusals of bad configs and busy workdirs."""
import os
import socket
import subprocess
import sys

import pytest

from countermem_jax.phases import workdir_guard
from countermem_jax.method.memory import MemoryStore, save_store
from helpers import make_record, paper


def _run(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)


def test_inspect_store_prints_the_summary(tmp_path):
    store = MemoryStore(paper("store"))
    store.propose(make_record(source_task_id="spider/pets_1/3"))
    store.propose(make_record(source_task_id="spider/pets_1/4", situation="count distinct pets",
                              original="SELECT count(pettype) FROM pets",
                              improved="SELECT count(DISTINCT pettype) FROM pets", condition=""))
    store.observe_reuse(store.records[0].record_id, 1)
    path = save_store(store.freeze(), tmp_path / "store.jsonl")
    out = _run("countermem_jax.inspect_store", f"--store={path}", "--top=2")
    assert out.returncode == 0, out.stderr
    for needle in ("(frozen)", "records 2 / capacity 200", "sql        spider", "1 conditional, 1 universal",
                   "delta  mean +1.000", "top 2 records by retention score", "c: bound == inclusive",
                   "c: (universal)", "+  SELECT count(DISTINCT pettype) FROM pets"):
        assert needle in out.stdout, needle


def test_inspect_store_reports_a_broken_file_cleanly(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "something-else"}\n')
    out = _run("countermem_jax.inspect_store", f"--store={bad}")
    assert out.returncode == 1 and "field 'format'" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("binary", ["build_memory", "train_selector", "evaluate"])
def test_phase_binaries_require_config_and_workdir(binary):
    out = _run(f"countermem_jax.{binary}")
    assert out.returncode != 0 and "--config" in out.stderr


CPU_CONFIG = "--config=configs/spider_react_cpu.py"


def _one_line_error(out, needle):
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and lines[-1].startswith("error: ") and needle in lines[-1]


@pytest.mark.parametrize("binary", ["build_memory", "train_selector", "evaluate"])
def test_phase_binaries_refuse_a_bad_config_in_one_line(binary, tmp_path):
    out = _run(f"countermem_jax.{binary}", CPU_CONFIG, f"--workdir={tmp_path / 'wd'}",
               "--config.memory.retention=lru")
    _one_line_error(out, "memory.retention='lru' is not one of: utility, recency, random, "
                         "similarity")
    assert not (tmp_path / "wd").exists()  # refused before the workdir was touched


@pytest.mark.parametrize("binary, flag", [("build_memory", "config"), ("evaluate", "config"),
                                          ("study", "config"), ("sweep", "sweep")])
def test_a_missing_config_file_is_one_line(binary, flag, tmp_path):
    workdir = [] if binary == "sweep" else [f"--workdir={tmp_path / 'wd'}"]
    out = _run(f"countermem_jax.{binary}", f"--{flag}={tmp_path / 'nope.py'}", *workdir)
    _one_line_error(out, f"--{flag}:")
    assert "No such file or directory" in out.stderr and not (tmp_path / "wd").exists()


@pytest.mark.parametrize("override, needle", [
    ("--config.splits.n_build=-1", "splits.n_build=-1 must be >= 0"),
    ("--config.construction.reuse_policy=sometimes", "construction.reuse_policy='sometimes' is "
     "not one of: always_skip, always_top1, relevance_threshold"),
    ("--config.eval.selector=best", "eval.selector='best' is not one of: dqn"),
])
def test_build_binary_names_the_bad_field(override, needle, tmp_path):
    _one_line_error(_run("countermem_jax.build_memory", CPU_CONFIG, f"--workdir={tmp_path}",
                         override), needle)


def test_build_binary_refuses_splits_larger_than_the_data_before_the_model(tmp_path, benchdata):
    wd = tmp_path / "wd"
    out = _run("countermem_jax.build_memory", CPU_CONFIG, f"--workdir={wd}",
               "--config.splits.n_build=100000", "--config.backbone.model_path=/nonexistent.gguf")
    _one_line_error(out, "splits.n_build=100000 but only")
    assert not (wd / "splits.json").exists() and not (wd / "fingerprint.json").exists()


def test_build_binary_refuses_a_workdir_whose_phase_is_running(tmp_path):
    with workdir_guard.phase_lock(tmp_path, "build_memory"):
        out = _run("countermem_jax.build_memory", CPU_CONFIG, f"--workdir={tmp_path}")
    _one_line_error(out, f"workdir {tmp_path}: phase build_memory is already running (pid "
                         f"{os.getpid()} on host {socket.gethostname()}")
