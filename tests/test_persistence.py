"""Store files: atomic writes, validation errors, hash checks and concurrent writers."""
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from countermem_jax.method.memory import (FrozenStoreError, MemoryStore, SnapshotHashMismatch,
                                   StoreFormatError, load_frozen, load_store, locked_store,
                                   persistence, save_store)
from countermem_jax.method.memory.store import FrozenStore
from helpers import make_record, paper


def _store(n=3):
    store = MemoryStore(paper("store", capacity=50))
    for i in range(n):
        store.propose(make_record(source_task_id=f"t{i}", situation=f"case {i}",
                                  original=f"SELECT a{i} FROM t WHERE v > {i}",
                                  improved=f"SELECT a{i} FROM t WHERE v >= {i}"))
    return store


def test_round_trip_keeps_everything(tmp_path):
    store = _store()
    store.observe_reuse(store.records[0].record_id, 1)
    path = save_store(store, tmp_path / "store.jsonl")
    loaded = load_store(path)
    assert isinstance(loaded, MemoryStore)
    assert loaded.records == store.records
    assert loaded.content_hash() == store.content_hash()
    assert loaded.snapshot_id == store.snapshot_id


def test_serialised_records_are_reused_and_the_file_and_hash_are_unchanged(tmp_path):
    """Each record's JSON text is computed once per record object (a construction run in waves
    saves and hashes the whole store after every task); the file lines and the content hash
    are the ones the plain per-object serialisation gives, non-ASCII text included."""
    from countermem_jax.method.memory.store import sha256_json
    store = _store()
    store.propose(make_record(source_task_id="t-u", situation="café ✓ naïve",
                              original="SELECT 1", improved="SELECT 2"))
    store.observe_reuse(store.records[0].record_id, 1)
    expected_hash = sha256_json({"config": store.config.to_json(),
                                 "records": [r.to_json() for r in store.records]})
    assert store.content_hash() == expected_hash
    path = save_store(store, tmp_path / "store.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[1:] == [json.dumps(r.to_json(), ensure_ascii=False, sort_keys=True)
                         for r in store.records]
    assert json.loads(lines[0])["content_hash"] == expected_hash
    record = store.records[1]
    assert record.json_text(canonical=True) is record.json_text(canonical=True)
    # a changed record is a new object: its text is computed afresh
    store.observe_reuse(record.record_id, -1)
    assert store.records[1].json_text(canonical=False) == json.dumps(
        store.records[1].to_json(), ensure_ascii=False, sort_keys=True)
    assert store.records[1].json_text(canonical=False) != record.json_text(canonical=False)


def test_frozen_round_trip_and_hash_check(tmp_path):
    frozen = _store().freeze()
    path = save_store(frozen, tmp_path / "frozen.jsonl")
    loaded = load_frozen(path, expected_hash=frozen.content_hash())
    assert isinstance(loaded, FrozenStore)
    with pytest.raises(SnapshotHashMismatch, match="differs from the expected"):
        load_frozen(path, expected_hash="0" * 64)
    with pytest.raises(FrozenStoreError):
        loaded.observe_reuse(loaded.records[0].record_id, 1)


def test_edited_snapshot_fails_its_own_hash(tmp_path):
    path = save_store(_store().freeze(), tmp_path / "frozen.jsonl")
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["reuse_utility"] = 0.9
    lines[1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SnapshotHashMismatch, match="was modified"):
        load_frozen(path)


def test_unfrozen_file_is_refused_for_evaluation(tmp_path):
    path = save_store(_store(), tmp_path / "s.jsonl")
    with pytest.raises(StoreFormatError, match="not a frozen snapshot"):
        load_frozen(path)


def test_corrupted_field_error_names_file_line_and_field(tmp_path):
    path = save_store(_store(), tmp_path / "s.jsonl")
    lines = path.read_text().splitlines()
    rec = json.loads(lines[2])
    rec["evidence"]["improved"]["utility"] = "high"
    lines[2] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreFormatError) as err:
        load_store(path)
    message = str(err.value)
    assert f"{path}:3" in message and "evidence.improved.utility" in message


def test_broken_json_line_is_reported(tmp_path):
    path = save_store(_store(), tmp_path / "s.jsonl")
    with open(path, "a") as f:
        f.write('{"record_id": \n')
    with pytest.raises(StoreFormatError, match=r"s\.jsonl:5: not valid JSON"):
        load_store(path)


def test_wrong_version_is_reported(tmp_path):
    path = save_store(_store(), tmp_path / "s.jsonl")
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["version"] = 99
    lines[0] = json.dumps(header)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreFormatError, match="field 'version'"):
        load_store(path)


def test_crash_mid_write_leaves_previous_snapshot(tmp_path, monkeypatch):
    path = save_store(_store(2), tmp_path / "s.jsonl")
    before = path.read_bytes()

    def crash_after_one_line(handle, lines):
        handle.write(next(iter(lines)) + "\n")
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(persistence, "_write_lines", crash_after_one_line)
    with pytest.raises(KeyboardInterrupt):
        save_store(_store(3), path)
    assert path.read_bytes() == before
    assert len(load_store(path)) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]


def test_process_killed_mid_write_leaves_previous_snapshot(tmp_path):
    path = save_store(_store(2), tmp_path / "s.jsonl")
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from countermem_jax.method.memory import persistence
        from test_persistence import _store
        real = persistence._write_lines
        def die(handle, lines):
            handle.write(next(iter(lines)) + "\\n"); handle.flush(); os._exit(9)
        persistence._write_lines = die
        persistence.save_store(_store(3), {str(path)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == 9, proc.stderr
    assert path.read_bytes() == before
    assert len(load_store(path)) == 2


def _writer(path, worker, n, shared_ids):
    for i in range(n):
        with locked_store(path, paper("store", capacity=1000)) as store:
            task = f"w{worker}-{i}" if not shared_ids else f"shared-{i}"
            store.propose(make_record(source_task_id=task, situation=f"case {task}",
                                      original=f"SELECT x FROM t{task.replace('-', '_')} WHERE a > 1",
                                      improved=f"SELECT x FROM t{task.replace('-', '_')} WHERE a >= 1",
                                      condition=""))


@pytest.mark.parametrize("shared_ids", [False, True])
def test_concurrent_writers_lose_and_duplicate_nothing(tmp_path, shared_ids):
    path = str(tmp_path / "store.jsonl")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 15, shared_ids)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = load_store(path)
    ids = [r.record_id for r in store.records]
    assert len(ids) == len(set(ids))
    assert len(ids) == (15 if shared_ids else 30)


def test_failed_transaction_writes_nothing(tmp_path):
    path = tmp_path / "s.jsonl"
    save_store(_store(2), path)
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with locked_store(path) as store:
            store.propose(make_record(source_task_id="new", situation="new case"))
            raise RuntimeError("task crashed")
    assert path.read_bytes() == before


def test_locked_store_refuses_frozen_file(tmp_path):
    path = save_store(_store().freeze(), tmp_path / "f.jsonl")
    with pytest.raises(FrozenStoreError):
        with locked_store(path):
            pass


def _edit_line(path, lineno, edit):
    """Rewrites line ``lineno`` (1-based) of a store file through ``edit(obj)`` on its JSON."""
    lines = path.read_text().splitlines()
    obj = json.loads(lines[lineno - 1])
    edit(obj)
    lines[lineno - 1] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")


def _set(dotted, value):
    def edit(obj):
        *parents, last = dotted.split(".")
        for key in parents:
            obj = obj[key]
        obj[last] = value
    return edit


@pytest.mark.parametrize("line, field, value, needle", [
    (1, "num_records", "3", "expected int, got str"),
    (1, "num_records", True, "expected int, got bool"),
    (1, "frozen", "yes", "expected bool, got str"),
    (1, "next_seq", -1, "must be >= 0"),
    (1, "content_hash", 123, "expected str, got int"),
    (1, "content_hash", "xyz", "64 lower-case hex digits"),
    (1, "config", [], "expected dict, got list"),
    (1, "config.capacity", "200", "expected int, got str"),
    (1, "config.capacity", 0, "must be >= 1"),
    (1, "config.admission.epsilon", float("nan"), "must be a finite number"),
    (1, "config.retention", "lru", "is not one of utility"),
    (1, "config.bogus", 1, "unknown field"),
    (1, "meta", "x", "expected dict, got str"),
    (2, "admission_score", float("nan"), "must be a finite number"),
    (2, "reuse_utility", float("inf"), "must be a finite number"),
    (2, "evidence.original.utility", float("nan"), "must be a finite number"),
    (2, "uses", 1.5, "expected int, got float"),
    (2, "provenance", "x", "expected dict, got str"),
    (2, "evidence.original", None, "expected dict, got NoneType"),
])
def test_malformed_fields_name_file_line_and_field(tmp_path, line, field, value, needle):
    path = save_store(_store(), tmp_path / "s.jsonl")
    _edit_line(path, line, _set(field, value))
    with pytest.raises(StoreFormatError) as err:
        load_store(path)
    message = str(err.value)
    assert f"{path}:{line}:" in message and f"field '{field}'" in message and needle in message


@pytest.mark.parametrize("field", ["config.reuse_rho", "config.admission.w_delta",
                                   "config.retention_weights"])
def test_a_store_setting_missing_from_the_header_is_refused_naming_it(tmp_path, field):
    """The header states every setting the store was built with; a missing one is not filled
    in from values stated elsewhere."""
    path = save_store(_store(), tmp_path / "s.jsonl")

    def drop(obj):
        *parents, last = field.split(".")
        for key in parents:
            obj = obj[key]
        del obj[last]
    _edit_line(path, 1, drop)
    with pytest.raises(StoreFormatError) as err:
        load_store(path)
    assert f"field '{field}': missing" in str(err.value)


def test_non_utf8_bytes_name_the_line(tmp_path):
    path = save_store(_store(), tmp_path / "s.jsonl")
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"case 1", b"case \xff1")
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(StoreFormatError, match=rf"s\.jsonl:3: not UTF-8 text \(byte 0xff"):
        load_store(path)


def test_directory_in_place_of_the_store_is_named(tmp_path):
    (tmp_path / "s.jsonl").mkdir()
    with pytest.raises(StoreFormatError, match=r"s\.jsonl: is a directory"):
        load_store(tmp_path / "s.jsonl")


def test_deeply_nested_line_is_a_format_error(tmp_path):
    path = save_store(_store(), tmp_path / "s.jsonl")
    with open(path, "a") as f:
        f.write("[" * 200_000 + "\n")
    with pytest.raises(StoreFormatError, match=r"s\.jsonl:5: not valid JSON"):
        load_store(path)
