"""Selector checkpoints carry a content hash that every restore verifies."""
import json
import shutil

import jax
import numpy as np
import pytest

from countermem_jax.method.selector import checkpoint, dqn
from helpers import paper

CFG = paper("dqn", total_decisions=1000, learning_starts=10, checkpoint_every=250)
RETURNS = [(250, 0.1), (500, 0.7), (750, 0.2)]  # best = 500


@pytest.fixture
def saved(tmp_path):
    state = dqn.init_state(CFG, 3)
    ckpt = checkpoint.SelectorCheckpointer(tmp_path / "sel", CFG, seed=3)
    for decisions, ret in RETURNS:
        ckpt.save(decisions, jax.tree_util.tree_map(lambda x: x * decisions, state.params), ret)
    ckpt.close()
    return tmp_path / "sel"


def _largest_array_file(step_dir):
    return max((p for p in step_dir.rglob("*") if p.is_file() and "ocdbt.process" in str(p)),
               key=lambda p: p.stat().st_size)


def test_intact_checkpoint_restores_the_best_step(saved):
    params, meta = checkpoint.restore(saved, "best")
    assert meta["decisions"] == 500
    record = json.loads((saved / "500.sha256.json").read_text())
    assert record["step"] == 500 and record["files"] and len(record["arrays_sha256"]) == 64


def test_flipped_byte_in_an_array_file_names_the_file(saved):
    victim = _largest_array_file(saved / "500")
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    with pytest.raises(checkpoint.CheckpointIntegrityError, match="content changed") as err:
        checkpoint.restore(saved, "best")
    assert str(victim) in str(err.value)


def test_truncated_array_file_names_the_file(saved):
    victim = _largest_array_file(saved / "500")
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(checkpoint.CheckpointIntegrityError, match=str(victim)):
        checkpoint.restore(saved, 500)


def test_deleted_array_file_names_the_file(saved):
    victim = _largest_array_file(saved / "250")
    victim.unlink()
    with pytest.raises(checkpoint.CheckpointIntegrityError, match=f"{victim}: missing"):
        checkpoint.restore(saved, 250)


def test_missing_best_step_is_an_error_not_another_checkpoint(saved):
    shutil.rmtree(saved / "500")
    with pytest.raises(checkpoint.CheckpointIntegrityError, match=f"{saved / '500'}: no such"):
        checkpoint.restore(saved, "best")


def test_step_directory_swapped_for_another_is_refused(saved):
    shutil.rmtree(saved / "500")
    shutil.copytree(saved / "750", saved / "500")
    with pytest.raises(checkpoint.CheckpointIntegrityError, match=str(saved / "500")):
        checkpoint.restore(saved, "best")


def test_restored_arrays_are_checked_against_the_saved_hash(saved):
    hash_file = saved / "750.sha256.json"
    record = json.loads(hash_file.read_text())
    record["arrays_sha256"] = "0" * 64
    hash_file.write_text(json.dumps(record))
    with pytest.raises(checkpoint.CheckpointIntegrityError, match="restored arrays"):
        checkpoint.restore(saved, 750)


@pytest.mark.parametrize("name, content, needle", [
    ("best.json", "{not json", "unreadable best-checkpoint record"),
    ("best.json", '{"best_step": "500"}', "field 'best_step' must be an integer"),
    ("500.sha256.json", "\xff garbage", "unreadable checkpoint content hash"),
    ("500.sha256.json", '{"files": []}', "malformed content hash"),
])
def test_corrupted_metadata_names_the_file(saved, name, content, needle):
    (saved / name).write_text(content)
    with pytest.raises(checkpoint.CheckpointIntegrityError, match=needle) as err:
        checkpoint.restore(saved, "best")
    assert str(saved / name) in str(err.value)


def test_missing_hash_file_names_it(saved):
    (saved / "500.sha256.json").unlink()
    with pytest.raises(checkpoint.CheckpointIntegrityError, match="missing"):
        checkpoint.restore(saved, "best")


def test_corrupted_meta_item_is_caught_before_it_is_read(saved):
    meta = next(p for p in (saved / "250" / "meta").rglob("*") if p.is_file()
                and "commit" not in p.name)
    meta.write_text("{broken")
    with pytest.raises(checkpoint.CheckpointIntegrityError, match=str(meta)):
        checkpoint.restore(saved, 250)
    params, meta = checkpoint.restore(saved, 750)  # the intact steps still restore, exactly
    expected = jax.tree_util.tree_map(lambda x: x * 750, dqn.init_state(CFG, 3).params)
    for got, want in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
