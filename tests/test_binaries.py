"""The absl binaries: inspect_store output and errors, required flags of the phase binaries."""
import subprocess
import sys

import pytest

from countermem_jax.memory import MemoryStore, save_store
from helpers import make_record


def _run(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)


def test_inspect_store_prints_the_summary(tmp_path):
    store = MemoryStore()
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
