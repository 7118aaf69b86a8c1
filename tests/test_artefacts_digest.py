"""benchmarks/artefacts.py's store digest, what a refactor is checked by: blind to when a store
was written, not to what it holds."""
import json

from benchmarks import artefacts


def _store(path, created_at, snapshot, action):
    header = {"format": 1, "snapshot_id": snapshot, "content_hash": snapshot * 2}
    record = {"record_id": "r1", "improved_action": action,
              "provenance": {"created_at": created_at, "snapshot_id": snapshot, "task": "t1"}}
    path.write_text("\n".join(json.dumps(x) for x in (header, record)) + "\n")
    return artefacts.store_digest(path)


def test_the_store_digest_ignores_the_runs_time_and_sees_a_changed_record(tmp_path):
    first = _store(tmp_path / "a.jsonl", "2026-12-02T06:13:09+00:00", "914241f20c18", "SELECT 1")
    again = _store(tmp_path / "b.jsonl", "2026-12-02T06:17:30+00:00", "feb0ae0672fa", "SELECT 1")
    other = _store(tmp_path / "c.jsonl", "2026-12-02T06:13:09+00:00", "914241f20c18", "SELECT 2")
    assert first == again and first[1] == 2
    assert other != first
