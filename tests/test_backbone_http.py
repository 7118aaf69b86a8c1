"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1."""
import asyncio
import time

import pytest

from countermem_jax.backbones.base import Charge, SamplingParams, TokenLedger
from benchmarks.testing.openai_server import LocalOpenAIServer
from countermem_jax.backbones.openai_http import BackboneError, OpenAICompatibleBackbone

MSG = [{"role": "user", "content": "hello"}]


def _client(urls, **kw):
    kw.setdefault("backoff_initial_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return OpenAICompatibleBackbone(urls, "openai/gpt-oss-120b", **kw)


def test_reads_text_reasoning_and_server_usage():
    with LocalOpenAIServer() as srv:
        ledger = TokenLedger()
        client = _client(srv.base_url, ledger=ledger, reasoning_effort="high")
        result = client.chat_sync(MSG, SamplingParams(seed=3), Charge("evaluation", "t1#0"))
        assert result.text.startswith("echo from local") and result.reasoning == "thinking..."
        assert (result.usage.prompt_tokens, result.usage.completion_tokens,
                result.usage.reasoning_tokens, result.usage.source) == (11, 7, 3, "server")
        assert srv.requests[0]["seed"] == 3 and srv.requests[0]["reasoning_effort"] == "high"
        assert ledger.total("evaluation").total == 18 and ledger.by_decision["t1#0"].total == 18


def test_reasoning_field_named_reasoning_and_missing_usage_counted_locally():
    with LocalOpenAIServer(with_usage=False, reasoning_field="reasoning") as srv:
        result = _client(srv.base_url).chat_sync(MSG)
        assert result.reasoning == "thinking..."
        assert result.usage.source == "tokenizer" and result.usage.prompt_tokens > 0
        assert result.usage.completion_tokens > 0


@pytest.mark.parametrize("failure", ["500", "429", "malformed", "drop", "503"])
def test_retries_transient_failures(failure):
    with LocalOpenAIServer() as srv:
        srv.script.extend([failure, failure])
        result = _client(srv.base_url).chat_sync(MSG)
        assert result.text.startswith("echo") and len(srv.requests) == 3 - (failure == "drop") * 0


def test_no_retry_on_client_errors():
    with LocalOpenAIServer(default="400") as srv:
        with pytest.raises(BackboneError, match="HTTP 400, not retried"):
            _client(srv.base_url).chat_sync(MSG)
        assert len(srv.requests) == 1


def test_error_names_the_server_once_retries_run_out():
    with LocalOpenAIServer(default="500") as srv:
        with pytest.raises(BackboneError) as err:
            _client(srv.base_url, max_attempts=3).chat_sync(MSG)
        assert srv.base_url in str(err.value) and "after 3 attempts" in str(err.value)
        assert "HTTP 500" in str(err.value) and len(srv.requests) == 3


def test_backoff_grows_between_attempts():
    with LocalOpenAIServer(default="429") as srv:
        start = time.perf_counter()
        with pytest.raises(BackboneError):
            _client(srv.base_url, max_attempts=4, backoff_initial_s=0.05,
                    backoff_max_s=0.2).chat_sync(MSG)
        assert len(srv.requests) == 4
        assert time.perf_counter() - start < 2.0


def test_failover_between_replicas():
    with LocalOpenAIServer(default="500", name="bad") as bad, \
            LocalOpenAIServer(name="good") as good:
        client = _client([bad.base_url, good.base_url], max_attempts=3)
        results = [client.chat_sync(MSG) for _ in range(4)]
        assert all("from good" in r.text for r in results)
        assert len(bad.requests) <= 1  # marked unhealthy after its first failure


def test_timeout_is_retried_on_another_replica():
    with LocalOpenAIServer(default="slow:2", name="slow") as slow, \
            LocalOpenAIServer(name="fast") as fast:
        client = _client([slow.base_url, fast.base_url], timeout_s=0.3)
        assert "from fast" in client.chat_sync(MSG).text


def test_concurrency_limit_is_held_and_usage_summed():
    with LocalOpenAIServer(latency_s=0.05) as a, LocalOpenAIServer(latency_s=0.05) as b:
        ledger = TokenLedger()
        client = _client([a.base_url, b.base_url], max_concurrency=4, ledger=ledger)

        async def run():
            await asyncio.gather(*[client.chat(MSG, charge=Charge("construction", f"d{i}"))
                                   for i in range(24)])
            await client.aclose()
        asyncio.run(run())
        assert client.peak_in_flight <= 4 and a.peak_in_flight + b.peak_in_flight <= 8
        assert len(a.requests) + len(b.requests) == 24
        assert abs(len(a.requests) - len(b.requests)) <= 4  # balanced
        assert ledger.total("construction").total == 24 * 18
        assert ledger.calls["construction"] == 24


def test_limit_holds_across_loops_and_survives_aclose():
    """Threads running their own loops (and loops closed one after another) share one cap, and
    one loop's aclose leaves the other loops' sessions open."""
    import threading
    with LocalOpenAIServer(latency_s=0.1) as srv:
        client = _client(srv.base_url, max_concurrency=3)

        async def burst(n, close):
            await asyncio.gather(*[client.chat([{"role": "user", "content": f"q{i}"}])
                                   for i in range(n)])
            if close:
                await client.aclose()

        async def main_loop():
            first = asyncio.create_task(burst(6, close=False))
            await asyncio.sleep(0.05)
            session = client._sessions[asyncio.get_running_loop()]
            threads = [threading.Thread(target=lambda: [asyncio.run(burst(4, close=True))
                                                        for _ in range(2)]) for _ in range(3)]
            for t in threads:
                t.start()
            await asyncio.to_thread(lambda: [t.join() for t in threads])
            await first
            assert client._sessions[asyncio.get_running_loop()] is session and not session.closed
            await burst(6, close=True)
        asyncio.run(main_loop())
        assert len(srv.requests) == 6 + 3 * 2 * 4 + 6
        assert srv.peak_in_flight == 3 and client.peak_in_flight == 3
        assert not client._sessions


def test_sequential_runs_keep_the_cap():
    with LocalOpenAIServer(latency_s=0.05) as srv:
        client = _client(srv.base_url, max_concurrency=2)
        for _ in range(3):
            async def run():
                await asyncio.gather(*[client.chat(MSG) for _ in range(6)])
                await client.aclose()
            asyncio.run(run())
        assert len(srv.requests) == 18 and srv.peak_in_flight == 2


def test_cancelled_waiters_leak_no_slot():
    with LocalOpenAIServer(latency_s=0.2) as srv:
        client = _client(srv.base_url, max_concurrency=2)

        async def run():
            tasks = [asyncio.create_task(client.chat(MSG)) for _ in range(6)]
            await asyncio.sleep(0.05)
            for t in tasks[1:5]:  # one running and three waiting are cancelled
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            srv.peak_in_flight = 0
            await asyncio.gather(*[client.chat(MSG) for _ in range(4)])
            await client.aclose()
        asyncio.run(run())
        assert srv.peak_in_flight == 2 and client._limit._free == 2


def test_waiters_are_served_first_come_first_served():
    """With the one slot taken, queued waiters get it in arrival order; a cancelled waiter is
    skipped and its place passes on."""
    from countermem_jax.backbones.openai_http import _SharedLimit
    limit, served = _SharedLimit(1), []

    async def request(name):
        async with limit:
            served.append(name)
            await asyncio.sleep(0)

    async def run():
        async with limit:  # the slot is taken while everyone queues
            waiting = [asyncio.create_task(request(name))
                       for name in ("first", "gone", "second", "third")]
            await asyncio.sleep(0)
            waiting[1].cancel()
            await asyncio.sleep(0)
        await asyncio.gather(*waiting, return_exceptions=True)
    asyncio.run(run())
    assert served == ["first", "second", "third"] and limit._free == 1
