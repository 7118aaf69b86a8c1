"""Bad user input to the phase binaries ends in one line naming the problem, exit status 1, before
any model is loaded (the backbone's model path does not exist, so loading it would fail with
another message), and leaves what is stored as it was."""
import pathlib
import subprocess
import sys

import pytest

from countermem_jax.phases import config_fingerprint
from countermem_jax.method.memory import MemoryStore, save_store
from countermem_jax.phases.workdir import Workdir
from countermem_jax.method.selector import checkpoint, dqn
from helpers import config_without_model, paper
from test_binaries import CPU_CONFIG, _one_line_error

ROOT = pathlib.Path(__file__).resolve().parent.parent
NO_MODEL = "--config.backbone.model_path=/nonexistent.gguf"


def _run(binary, workdir, *overrides):
    return subprocess.run([sys.executable, "-m", f"countermem_jax.{binary}", CPU_CONFIG,
                           f"--workdir={workdir}", NO_MODEL, *overrides],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def _config():
    """The config the binaries see (same file and override), to record a workdir's fingerprints."""
    return config_without_model(ROOT / CPU_CONFIG.split("=", 1)[1].split(":")[0])


def _workdir_made_by(tmp_path, *phases):
    root = tmp_path / "wd"
    root.mkdir()
    for phase in phases:
        assert config_fingerprint.record(_config(), root, phase)
    return root


def _files(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and ".locks" not in
            p.parts and p.name != config_fingerprint.FINGERPRINT_FILE}


def test_train_selector_without_a_store_refuses_before_the_model(tmp_path, benchdata):
    out = _run("train_selector", tmp_path / "wd")
    _one_line_error(out, "store_frozen.jsonl: no frozen store; run build_memory first")


def test_unknown_db_ids_are_named_and_the_fingerprint_taken_back(tmp_path, benchdata):
    wd = tmp_path / "wd"
    out = _run("build_memory", wd, "--config.data.db_ids=('pets_1','no_such_db')")
    _one_line_error(out, "data.db_ids: no question of")
    assert "uses the database(s) no_such_db" in out.stderr
    # the corrected config must not be refused as "another config"
    assert not (wd / config_fingerprint.FINGERPRINT_FILE).exists()


@pytest.mark.parametrize("below", [False, True])
def test_a_workdir_that_is_a_file_is_refused(tmp_path, below):
    target = tmp_path / "results.txt"
    target.write_text("kept")
    out = _run("build_memory", target / "wd" if below else target)
    _one_line_error(out, f"{target}, not a directory" if below else
                    f"--workdir={target} is a file, not a directory")
    assert target.read_text() == "kept"


def test_a_store_whose_processed_tasks_is_a_string_is_refused(tmp_path, benchdata):
    root = _workdir_made_by(tmp_path, "build_memory")
    store = MemoryStore(paper("store"))
    store.meta["processed_tasks"] = "spider/pets_1/3"   # a set() of it would be its characters
    save_store(store, Workdir(root).store)
    before = _files(root)
    out = _run("build_memory", root)
    _one_line_error(out, "store.jsonl:1: header: field 'meta.processed_tasks': expected a list "
                         'of task ids, got "spider/pets_1/3"')
    assert _files(root) == before


@pytest.mark.parametrize("binary", ["train_selector", "evaluate"])
def test_a_broken_orbax_metrics_file_is_named(tmp_path, binary, benchdata):
    root = _workdir_made_by(tmp_path, "build_memory", "train_selector")
    wd = Workdir(root)
    wd.write_frozen(MemoryStore(paper("store")).freeze())
    cfg = paper("dqn", total_decisions=500, learning_starts=10, checkpoint_every=250)
    ckpt = checkpoint.SelectorCheckpointer(wd.seed_dir(0), cfg, seed=0)
    ckpt.save(250, dqn.init_state(cfg, 0).params, 0.5)
    ckpt.close()
    metrics = wd.seed_dir(0) / "250" / "metrics" / "metrics"
    metrics.write_text('{"val_return": 0.5')   # cut short, as by a full disk
    before = _files(root)
    out = _run(binary, root, "--config.selector.seeds=(0,)")
    _one_line_error(out, f"{metrics}: unreadable Orbax checkpoint metrics")
    assert _files(root) == before
