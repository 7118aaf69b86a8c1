"""The opt-in on-disk response cache."""
import multiprocessing

from countermem_jax.backbones.base import SamplingParams, TokenLedger
from countermem_jax.backbones.cache import CachedBackbone
from countermem_jax.backbones.local_server import LocalOpenAIServer
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
        for f in tmp_path.rglob("*.json"):
            f.write_text("{broken")
        assert not cached.chat_sync(MSG).cached and len(srv.requests) == 2


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
