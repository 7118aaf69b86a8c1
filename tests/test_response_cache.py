"""The opt-in on-disk response cache."""
import asyncio
import json
import multiprocessing
import pathlib

import pytest


from countermem_jax.backbones.base import SamplingParams, TokenLedger
from countermem_jax.backbones.cache import CachedBackbone
from benchmarks.testing.openai_server import LocalOpenAIServer
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone

MSG = [{"role": "user", "content": "hello"}]


def test_hit_and_miss(tmp_path):
    with LocalOpenAIServer() as srv:
        ledger = TokenLedger()
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m", ledger=ledger),
                                tmp_path)
        first = cached.chat_sync(MSG, SamplingParams(seed=1))
        second = cached.chat_sync(MSG, SamplingParams(seed=1))
        other_seed = cached.chat_sync(MSG, SamplingParams(seed=2))
        assert len(srv.requests) == 2
        assert second.cached and not first.cached and not other_seed.cached
        assert second.text == first.text and second.usage == first.usage
        assert (cached.hits, cached.misses) == (1, 2) and ledger.cached_calls == 1


def test_damaged_entry_is_refetched(tmp_path):
    with LocalOpenAIServer() as srv:
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        cached.chat_sync(MSG)
        files = list(tmp_path.rglob("*.json"))
        assert len(files) == 1
        files[0].write_text("{broken")
        assert cached.chat_sync(MSG).cached  # this process still has the reply in memory
        fresh = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        assert not fresh.chat_sync(MSG).cached and len(srv.requests) == 2
        assert json.loads(files[0].read_text())["text"]   # rewritten whole


def test_a_cancelled_leaders_call_finishes_for_the_cache_and_its_waiters(tmp_path):
    """A stale construction run cancelled while its call is under way: the call still finishes
    (the server answers once), its waiter gets the reply, and a later identical request is a
    hit, not a second server call."""
    with LocalOpenAIServer(latency_s=0.2) as srv:
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)

        async def scenario():
            leader = asyncio.ensure_future(cached.chat(MSG))
            await asyncio.sleep(0.05)  # the leader's request is at the server
            waiter = asyncio.ensure_future(cached.chat(MSG))
            await asyncio.sleep(0.01)
            leader.cancel()
            joined = await waiter
            later = await cached.chat(MSG)
            await cached.aclose()
            return leader.cancelled(), joined, later
        cancelled, joined, later = asyncio.run(scenario())
    assert cancelled and joined.cached and later.cached
    assert len(srv.requests) == 1


def test_recent_replies_are_served_from_memory(tmp_path, monkeypatch):
    """A repeated request in the same process reads no file (the entry may even be gone)."""
    with LocalOpenAIServer() as srv:
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        first = cached.chat_sync(MSG)
        for entry in tmp_path.rglob("*.json"):
            entry.unlink()
        monkeypatch.setattr(pathlib.Path, "read_text", lambda *a, **k: pytest.fail("disk read"))
        again = cached.chat_sync(MSG)
    assert again.cached and again.text == first.text and len(srv.requests) == 1


def _worker(url, path, n):
    cached = CachedBackbone(OpenAICompatibleBackbone(url, "m"), path)
    for i in range(n):
        cached.chat_sync([{"role": "user", "content": f"q{i % 5}"}])


def test_concurrent_writers_share_one_cache(tmp_path):
    with LocalOpenAIServer() as srv:
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_worker, args=(srv.base_url, str(tmp_path), 20)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
        files = list(tmp_path.rglob("*.json"))
        assert len(files) == 5 and not list(tmp_path.rglob("*.tmp"))
        before = len(srv.requests)
        _worker(srv.base_url, str(tmp_path), 10)
        assert len(srv.requests) == before


def _concurrently(cached, requests):
    import asyncio

    async def run():
        try:
            return await asyncio.gather(*[cached.chat(m) for m in requests],
                                        return_exceptions=True)
        finally:
            await cached.aclose()
    return asyncio.run(run())


def test_identical_requests_in_flight_are_computed_once(tmp_path):
    with LocalOpenAIServer(latency_s=0.3) as srv:
        ledger = TokenLedger()
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m", ledger=ledger),
                                tmp_path)
        results = _concurrently(cached, [MSG] * 16)
        assert len(srv.requests) == 1 and len({r.text for r in results}) == 1
        assert sum(not r.cached for r in results) == 1 and (cached.hits, cached.misses) == (15, 1)
        # the ledger equals the sequential run's: 16 calls at the original usage, 15 cached
        assert ledger.total("other").total == 16 * 18 and ledger.cached_calls == 15


def test_single_flight_does_not_merge_different_requests(tmp_path):
    with LocalOpenAIServer(latency_s=0.2) as srv:
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        requests = [[{"role": "user", "content": f"q{i % 4}"}] for i in range(16)]
        results = _concurrently(cached, requests)
        assert len(srv.requests) == 4
        assert all(r.text.endswith(m[0]["content"]) for r, m in zip(results, requests))


def test_single_flight_shares_across_event_loops(tmp_path):
    import threading
    with LocalOpenAIServer(latency_s=0.3) as srv:
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        out = []
        threads = [threading.Thread(target=lambda: out.extend(_concurrently(cached, [MSG] * 4)))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(out) == 16 and len(srv.requests) == 1 and cached.misses == 1


def test_a_failed_leader_raises_in_every_waiter_and_is_not_cached(tmp_path):
    from countermem_jax.backbones.openai_http import BackboneError
    with LocalOpenAIServer(latency_s=0.2, default="400") as srv:
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        results = _concurrently(cached, [MSG] * 16)
        assert len(srv.requests) == 1
        assert all(isinstance(r, BackboneError) for r in results)
        assert not list(tmp_path.rglob("*.json")) and not cached._in_flight
        srv.default = "ok"
        assert not cached.chat_sync(MSG).cached and len(srv.requests) == 2


def test_an_entry_is_on_disk_when_the_call_returns(tmp_path):
    with LocalOpenAIServer() as srv:
        cached = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        first = cached.chat_sync(MSG)
        files = list(tmp_path.rglob("*.json"))
        assert len(files) == 1 and not list(tmp_path.rglob("*.tmp"))
        assert json.loads(files[0].read_text())["text"] == first.text
        again = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        assert again.chat_sync(MSG).cached and len(srv.requests) == 1


def test_a_new_request_opens_no_file_and_an_entry_on_disk_is_still_read(tmp_path, monkeypatch):
    """A fan-out folder is listed once: a key not in it is a miss without an open; an entry
    written before (by an earlier process) is read from disk."""
    with LocalOpenAIServer() as srv:
        writer = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        writer.chat_sync(MSG)
        reads = []
        original = pathlib.Path.read_text
        monkeypatch.setattr(pathlib.Path, "read_text",
                            lambda self, *a, **k: reads.append(self.name) or original(self, *a, **k))
        reader = CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "m"), tmp_path)
        assert reader.chat_sync(MSG).cached and len(reads) == 1
        for i in range(5):
            assert not reader.chat_sync([{"role": "user", "content": f"new {i}"}]).cached
        assert len(reads) == 1 and len(srv.requests) == 6
