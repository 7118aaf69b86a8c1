"""Faults in the reply cache: an entry that is not the cache's own format is a miss. The user
gets the reply (from the server again), one warning line, and the entry written whole in its
place; no other entry is touched and the run goes on."""
import json

import pytest

from countermem_jax.backbones.cache import CachedBackbone
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from benchmarks.testing.openai_server import LocalOpenAIServer

MSG = [{"role": "user", "content": "hello"}]
OTHER = [{"role": "user", "content": "another question"}]


def _valid_entry() -> dict:
    return {"text": "hi", "reasoning": "", "model": "m", "finish_reason": "stop",
            "constrained": False, "usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                            "reasoning_tokens": 0, "source": "server",
                                            "cached_tokens": 0}}


def _damage(path, how):
    if how == "directory":
        path.unlink()
        (path / "inside").mkdir(parents=True)
        return
    data = {
        "not_utf8": b'{"text": "\xff\xfe", "reasoning": ""}',
        "truncated": path.read_bytes()[:17],
        "deep_nesting": b"[" * 100_000 + b"]" * 100_000,
        "non_numeric_usage": json.dumps(_valid_entry() | {"usage": {
            "prompt_tokens": "many", "completion_tokens": 2}}).encode(),
        "non_string_text": json.dumps(_valid_entry() | {"text": ["not", "text"]}).encode(),
        "not_an_object": b'["hi", "", {}]',
    }[how]
    path.write_bytes(data)


@pytest.mark.parametrize("how", ["not_utf8", "truncated", "deep_nesting", "non_numeric_usage",
                                 "non_string_text", "not_an_object", "directory"])
def test_a_damaged_entry_is_a_counted_miss_refetched_and_rewritten(tmp_path, capsys, how):
    """A damaged entry (``how``) in a cache another run left: the user gets the server's reply,
    as on a miss, one ``warning: reply cache ...`` line, and the entry rewritten whole; the
    other entry of the cache is still a hit (nothing stored is lost)."""
    with LocalOpenAIServer() as srv:
        first = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        first.chat_sync(MSG)
        damaged = next(tmp_path.rglob("*.json"))
        first.chat_sync(OTHER)
        entries = sorted(tmp_path.rglob("*.json"))
        assert len(entries) == 2
        other = next(p for p in entries if p != damaged)
        keep = other.read_bytes()
        _damage(damaged, how)
        capsys.readouterr()
        fresh = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        again = [fresh.chat_sync(MSG), fresh.chat_sync(OTHER)]
        assert [r.cached for r in again] == [False, True] and len(srv.requests) == 3
        assert fresh.damaged == 1 and fresh.misses == 1 and fresh.hits == 1
        assert damaged.is_file() and json.loads(damaged.read_text(encoding="utf-8"))["text"]
        assert other.read_bytes() == keep
        err = capsys.readouterr().err
        assert err.count("warning: reply cache") == 1 and str(damaged) in err
        assert "Traceback" not in err
        reread = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        assert all(reread.chat_sync(m).cached for m in (MSG, OTHER)) and reread.damaged == 0


def test_many_damaged_entries_are_reported_once_and_each_refetched(tmp_path, capsys):
    """Every entry of a cache damaged (a disk that returned garbage): each is refetched and
    counted; the user reads one warning line, not one per entry."""
    with LocalOpenAIServer() as srv:
        first = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        first.chat_sync(MSG)
        first.chat_sync(OTHER)
        for path in tmp_path.rglob("*.json"):
            path.write_bytes(b"\x00\x9c garbage")
        capsys.readouterr()
        fresh = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        assert not any(fresh.chat_sync(m).cached for m in (MSG, OTHER))
        assert fresh.damaged == 2 and len(srv.requests) == 4
        assert capsys.readouterr().err.count("warning: reply cache") == 1


def test_an_entry_write_cut_by_a_full_disk_leaves_no_temporary_file(tmp_path, monkeypatch):
    """The disk fills while an entry is written (the write cut and failed with ENOSPC as a
    full disk does): the error is the OS's, and neither a partial entry nor its temporary file
    is left in the cache (writes stay atomic)."""
    from countermem_jax.backbones import cache
    real = cache.pathlib.Path.write_text

    def full(self, text, *args, **kwargs):
        real(self, text[:5], *args, **kwargs)
        raise OSError(28, "No space left on device")
    with LocalOpenAIServer() as srv:
        backbone = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        monkeypatch.setattr(cache.pathlib.Path, "write_text", full)
        with pytest.raises(OSError, match="No space left"):
            backbone.chat_sync(MSG)
    monkeypatch.undo()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
