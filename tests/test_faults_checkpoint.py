"""Faults while a selector checkpoint is saved: a kill before its hash record or inside Orbax,
a file-size limit, a full disk. A checkpoint is whole or absent: the resumed training saves a
cut step again, every step it leaves restores, and the artefacts equal an uninterrupted run's;
a write error is one line."""
import json
import re
import subprocess

import jax
import pytest

import fault_worker
from countermem_jax.method.selector import checkpoint, dqn
from helpers import paper
from test_faults_runlog import (_train_result, assert_same_training,  # noqa: F401
                                reference, run_with_fault, tmpfs)


def _every_step_restores(wd) -> None:
    """What evaluate needs: each saved step of each seed passes its content check."""
    for seed in (0, 1):
        directory = wd / "selector" / f"seed_{seed}"
        best = json.loads((directory / "best.json").read_text())
        assert best["steps"]
        for step in best["steps"]:
            checkpoint.restore(directory, step)
        checkpoint.restore(directory, "best")


def test_a_kill_between_the_orbax_save_and_its_hash_record_resumes_whole(tmp_path, reference,
                                                                        capfd):
    """SIGKILL after Orbax committed a step and before its hash record: the rerun says in one
    line that it drops the step and saves it again; every step then restores (evaluate refuses
    none) and the selector equals the uninterrupted run's."""
    wd = tmp_path / "wd"
    fault_worker.run(tmp_path, wd, 1, "build_memory")
    out = run_with_fault(tmp_path, wd, 1, "train_selector", "kill_before_hash", 1)
    assert out.returncode == -9, out.stderr
    cut = [p for seed in (0, 1) for p in (wd / "selector" / f"seed_{seed}").iterdir()
           if p.name.isdigit() and not (p.parent / f"{p.name}.sha256.json").exists()]
    assert len(cut) == 1
    capfd.readouterr()
    fault_worker.run(tmp_path, wd, 1, "train_selector")
    said = [line for line in capfd.readouterr().err.replace("\r", "\n").splitlines()
            if "dropped selector checkpoint" in line]
    assert said == [f"{cut[0].parent}: dropped selector checkpoint(s) [{int(cut[0].name)}] "
                    "saved without their content hash (the run was cut while saving); training "
                    "saves them again"]
    _every_step_restores(wd)
    assert_same_training(reference(1), _train_result(wd))


def test_a_kill_inside_an_orbax_save_resumes_whole(tmp_path, reference):
    """SIGKILL while Orbax writes a step: its temporary folder is cleared on resume, the step
    saved again, and the selector equals the uninterrupted run's."""
    wd = tmp_path / "wd"
    fault_worker.run(tmp_path, wd, 1, "build_memory")
    out = run_with_fault(tmp_path, wd, 1, "train_selector", "kill_in_orbax", 2)
    assert out.returncode == -9, out.stderr
    fault_worker.run(tmp_path, wd, 1, "train_selector")
    _every_step_restores(wd)
    assert not list((wd / "selector").rglob("*orbax-checkpoint-tmp*"))
    assert_same_training(reference(1), _train_result(wd))


def _one_write_error(out, reason: str) -> None:
    """The child ended as a binary should on a write error: one ``error:`` line with the OS's
    reason, none of Orbax's error lines, no traceback of ours. (tensorstore's own threads may
    print one after the failed write: the callbacks of its other writes in flight reach
    Orbax's event loop, already closed; those have only asyncio frames.)"""
    assert out.returncode == 1, out.stderr
    # tensorstore's threads write their tracebacks in pieces, so one may stand on either side
    # of the line in the same screen line: the line is found by its text, not by where it starts
    ours = re.findall(r"error: (?:(?!error: ).)*?saving the selector checkpoint failed: "
                      + re.escape(reason), out.stderr)
    assert len(ours) == 1, out.stderr[-3000:]
    assert len(re.findall(r"error: ", out.stderr)) == 1, out.stderr[-3000:]
    frames = re.findall(r'File "([^"]+)"', out.stderr)
    assert all(f.endswith("asyncio/base_events.py") for f in frames), out.stderr[-3000:]
    assert "ERROR:absl" not in out.stderr, out.stderr[-3000:]


def test_a_file_size_limit_inside_orbax_is_one_line_and_resumes_whole(tmp_path, reference):
    """RLIMIT_FSIZE reached while Orbax writes the arrays: one ``error:`` line; once the limit
    is lifted the rerun saves the step again and equals the uninterrupted run."""
    wd = tmp_path / "wd"
    fault_worker.run(tmp_path, wd, 1, "build_memory")
    out = run_with_fault(tmp_path, wd, 1, "train_selector", "fsize_in_orbax", 1)
    _one_write_error(out, "File too large")
    fault_worker.run(tmp_path, wd, 1, "train_selector")
    _every_step_restores(wd)
    assert_same_training(reference(1), _train_result(wd))


def test_a_full_disk_inside_orbax_is_one_line_and_resumes_whole(tmpfs, reference):
    """The disk (a tmpfs) full when a checkpoint is saved: one ``error:`` line; once space is
    freed the rerun equals the uninterrupted run."""
    wd = tmpfs / "wd"
    fault_worker.run(tmpfs.parent, wd, 1, "build_memory")
    out = run_with_fault(tmpfs.parent, wd, 1, "train_selector", "full_in_orbax", 1)
    _one_write_error(out, "No space left on device")
    (tmpfs / "filler").unlink()
    fault_worker.run(tmpfs.parent, wd, 1, "train_selector")
    _every_step_restores(wd)
    assert_same_training(reference(1), _train_result(wd))


def test_a_workdir_made_read_only_inside_orbax_is_one_line_and_resumes_whole(tmpfs, reference):
    """The workdir made read-only (a read-only bind mount over it, as a remount would) while a
    checkpoint is saved: one ``error:`` line; nothing stored before is lost, and once it is
    writable again the rerun equals the uninterrupted run."""
    wd = tmpfs / "wd"
    fault_worker.run(tmpfs.parent, wd, 1, "build_memory")
    store = (wd / "store_frozen.jsonl").read_bytes()
    out = run_with_fault(tmpfs.parent, wd, 1, "train_selector", "readonly_in_orbax", 1)
    subprocess.run(["umount", str(wd)], check=True)
    _one_write_error(out, "Read-only file system")
    assert (wd / "store_frozen.jsonl").read_bytes() == store
    fault_worker.run(tmpfs.parent, wd, 1, "train_selector")
    _every_step_restores(wd)
    assert_same_training(reference(1), _train_result(wd))


CFG = paper("dqn", total_decisions=1000, learning_starts=10, checkpoint_every=250)


def _save(directory, steps):
    params = dqn.init_state(CFG, 3).params
    ckpt = checkpoint.SelectorCheckpointer(directory, CFG, seed=3)
    for step, value in steps:
        ckpt.save(step, jax.tree_util.tree_map(lambda x: x * step, params), value)
    return ckpt


@pytest.mark.parametrize("damage", ["stale", "missing"])
def test_a_best_record_a_kill_left_behind_is_rewritten_on_resume(tmp_path, damage):
    """A kill after a step's hash record and before ``best.json`` (stale, or not yet written):
    reopening for training rewrites it from the steps, so the best step evaluation reads is the
    one training chose."""
    _save(tmp_path / "sel", [(250, 0.1)]).close()
    stale = (tmp_path / "sel" / "best.json").read_text()
    ckpt = _save(tmp_path / "sel", [(500, 0.7)])
    ckpt.close()
    if damage == "stale":
        (tmp_path / "sel" / "best.json").write_text(stale)
    else:
        (tmp_path / "sel" / "best.json").unlink()
    checkpoint.SelectorCheckpointer(tmp_path / "sel", CFG, seed=3).close()
    best = json.loads((tmp_path / "sel" / "best.json").read_text())
    assert best["best_step"] == 500 and best["steps"] == [250, 500]
    assert best["val_returns"] == {"250": 0.1, "500": 0.7}
    assert checkpoint.read_best_step(tmp_path / "sel") == 500


def test_the_records_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A crash while the hash record is written leaves no record (the step is dropped and
    saved again on resume), never a partial one that evaluate would refuse."""
    ckpt = _save(tmp_path / "sel", [(250, 0.1)])
    real = checkpoint.os.replace

    def crash(src, dst):
        raise KeyboardInterrupt
    monkeypatch.setattr(checkpoint.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save(500, dqn.init_state(CFG, 3).params, 0.7)
    monkeypatch.setattr(checkpoint.os, "replace", real)
    ckpt.close()
    assert not (tmp_path / "sel" / "500.sha256.json").exists()
    assert [p.name for p in (tmp_path / "sel").iterdir() if p.name.endswith(".tmp")] == []
    assert checkpoint.drop_unrecorded_steps(tmp_path / "sel") == [500]
    reopened = checkpoint.SelectorCheckpointer(tmp_path / "sel", CFG, seed=3)
    assert reopened.steps() == [250]
    reopened.close()


def test_an_older_step_without_its_record_is_kept_for_restore_to_refuse(tmp_path):
    """Only the last step can be cut by a kill (saves are sequential): an earlier step without
    its hash record was not cut but damaged, and is kept (nothing stored is deleted) for
    evaluation to refuse by name."""
    _save(tmp_path / "sel", [(250, 0.1), (500, 0.7)]).close()
    (tmp_path / "sel" / "250.sha256.json").unlink()
    assert checkpoint.drop_unrecorded_steps(tmp_path / "sel") == []
    ckpt = checkpoint.SelectorCheckpointer(tmp_path / "sel", CFG, seed=3)
    assert ckpt.steps() == [250, 500]
    ckpt.close()
    with pytest.raises(checkpoint.CheckpointIntegrityError, match="250.sha256.json: missing"):
        checkpoint.restore(tmp_path / "sel", 250)
