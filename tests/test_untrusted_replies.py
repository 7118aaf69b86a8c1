"""Issue 39, items 1 and 3: a model's reply is untrusted input. At the backbone boundary every
reply is decoded leniently, cleaned of lone surrogates and NUL, capped in length and counted as
malformed; nothing raises, and everything written afterwards is UTF-8 (backbones/replies.py).
The client talks to a real loopback server (benchmarks/testing/openai_server.py)."""
import asyncio
import json

import pytest

from countermem_jax.backbones import replies
from countermem_jax.backbones.base import (Backbone, ChatResult, Charge, SamplingParams,
                                           TokenLedger, Usage)
from countermem_jax.backbones.cache import CachedBackbone
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from countermem_jax.method.prompting import prompts
from countermem_jax.method.prompting.failures import ParseFailureLog
from benchmarks.testing.openai_server import LocalOpenAIServer

MSG = [{"role": "user", "content": "hello"}]
BAD = "@@bad-bytes@@"


class BrokenServer(LocalOpenAIServer):
    """Answers every request with ``content`` (any JSON value) and ``finish``, or replaces the
    whole response: ``payload`` (a dict sent as JSON) or ``body`` (raw bytes); ``BAD`` in the
    JSON text becomes bytes that are not UTF-8."""

    def __init__(self, content="ok", finish="stop", payload=None, body=None):
        super().__init__()
        self.content, self.finish, self.payload, self.body = content, finish, payload, body

    def reply(self, request):
        out = super().reply(request)
        out["choices"][0]["message"]["content"] = self.content
        out["choices"][0]["finish_reason"] = self.finish
        return self.payload if self.payload is not None else out

    def encode(self, payload):
        if self.body is not None:
            return self.body
        return json.dumps(payload).encode().replace(BAD.encode(), b"\xff\xfe")


def _chat(server, params=SamplingParams(), ledger=None, **kw):
    client = OpenAICompatibleBackbone(server.base_url, "m", backoff_initial_s=0.01,
                                      backoff_max_s=0.02, ledger=ledger, **kw)
    return client.chat_sync(MSG, params, Charge("construction", "t#0"))


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def test_a_lone_surrogate_is_replaced_and_counted_in_the_ledger():
    ledger = TokenLedger()
    with BrokenServer(content="SELECT 1\udcff") as srv:
        result = _chat(srv, ledger=ledger)
    assert result.text == "SELECT 1\ufffd" and _utf8(result.text)
    assert result.malformed == "surrogate"
    assert ledger.summary()["malformed_replies"] == {"construction": 1}


def test_invalid_utf8_in_the_body_is_decoded_leniently_and_not_retried():
    with BrokenServer(content="SELECT 1" + BAD) as srv:
        result = _chat(srv)
        assert len(srv.requests) == 1
    assert result.text.startswith("SELECT 1\ufffd") and "invalid_utf8" in result.malformed


def test_nul_is_replaced_and_counted():
    with BrokenServer(content="SELECT\x001") as srv:
        result = _chat(srv)
    assert result.text == "SELECT\ufffd1" and result.malformed == "nul"


def test_empty_choices_give_an_empty_counted_reply_without_retries():
    ledger = TokenLedger()
    with BrokenServer(payload={"choices": [], "model": "m"}) as srv:
        result = _chat(srv, ledger=ledger)
        assert len(srv.requests) == 1
    assert (result.text, result.malformed) == ("", "empty_choices")
    assert ledger.malformed["construction"] == 1


@pytest.mark.parametrize("content,reason", [({"text": "x"}, "not_text"), (7, "not_text")])
def test_content_that_is_not_text_gives_an_empty_reply(content, reason):
    with BrokenServer(content=content) as srv:
        result = _chat(srv)
    assert (result.text, result.malformed) == ("", reason)


def test_a_choice_without_a_message_gives_an_empty_reply():
    with BrokenServer(payload={"choices": [{"finish_reason": "stop"}]}) as srv:
        result = _chat(srv)
    assert (result.text, result.malformed) == ("", "no_message")


def test_a_body_that_is_never_json_gives_an_empty_reply_after_the_retries():
    with BrokenServer(body=b'{"choices": [ not json') as srv:
        result = _chat(srv, max_attempts=3)
        assert len(srv.requests) == 3
    assert (result.text, result.malformed) == ("", "not_json")


def test_a_body_nested_past_the_parser_stack_gives_an_empty_reply():
    with BrokenServer(body=b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}") as srv:
        result = _chat(srv, max_attempts=2)
    assert (result.text, result.malformed) == ("", "not_json")


def test_a_reply_past_the_cap_is_cut_and_reads_as_a_truncation():
    cap = replies.reply_char_cap(200)
    with BrokenServer(content="x" * (cap + 5000)) as srv:
        result = _chat(srv, SamplingParams(max_tokens=200))
    assert len(result.text) == cap and result.finish_reason == "length"
    assert result.malformed == "over_length"


def test_a_body_past_the_byte_bound_is_not_parsed():
    with BrokenServer(content="x" * (replies.MAX_BODY_BYTES + 10)) as srv:
        result = _chat(srv)
    assert (result.text, result.finish_reason, result.malformed) == ("", "length", "over_length")


def test_finish_reason_length_on_valid_json_is_counted_and_asked_again():
    failures = ParseFailureLog()
    with BrokenServer(content='{"verdict": "YES"}', finish="length") as srv:
        client = OpenAICompatibleBackbone(srv.base_url, "m")

        async def call():
            try:
                return await prompts.checked_chat(client, MSG, SamplingParams(max_tokens=8),
                                                  Charge(purpose="probe"), failures)
            finally:
                await client.aclose()
        result, _, calls = asyncio.run(call())
    assert result.text == '{"verdict": "YES"}' and calls == 2
    counts = failures.summary()["probe"]
    assert (counts["truncated"], counts["truncation_retries"], counts["malformed_replies"]) == \
        (2, 1, 0)


def test_malformed_replies_are_counted_per_template_in_the_reply_outcomes():
    failures = ParseFailureLog()
    with BrokenServer(content="x\udcff") as srv:
        client = OpenAICompatibleBackbone(srv.base_url, "m")

        async def call():
            try:
                return await prompts.checked_chat(client, MSG, SamplingParams(),
                                                  Charge(purpose="probe"), failures)
            finally:
                await client.aclose()
        asyncio.run(call())
    assert failures.summary()["probe"]["malformed_replies"] == 1
    assert failures.summary()["total"]["malformed_replies"] == 1


class _Raw(Backbone):
    """Any backend (llama.cpp included) returning ``text`` as it is."""

    def __init__(self, text):
        super().__init__()
        self.text = text

    async def _chat(self, messages, params):
        return ChatResult(self.text, usage=Usage(1, 1))


def test_every_backend_is_cleaned_and_capped_at_the_boundary():
    result = _Raw("a\udcff\x00" + "b" * 100_000).chat_sync(MSG, SamplingParams(max_tokens=64))
    assert _utf8(result.text) and "\x00" not in result.text
    assert len(result.text) == replies.reply_char_cap(64)
    assert result.malformed == "nul,surrogate,over_length" and result.finish_reason == "length"


def test_a_cached_malformed_reply_is_counted_again_on_a_hit(tmp_path):
    ledger = TokenLedger()
    with BrokenServer(content="x\udcff") as srv:
        inner = OpenAICompatibleBackbone(srv.base_url, "m", ledger=ledger)
        cached = CachedBackbone(inner, tmp_path / "cache")
        first = cached.chat_sync(MSG)
        again = CachedBackbone(inner, tmp_path / "cache").chat_sync(MSG)
    assert again.cached and again.text == first.text == "x\ufffd"
    assert ledger.malformed["other"] == 2


def test_well_formed_replies_are_untouched():
    ledger = TokenLedger()
    with BrokenServer(content="SELECT name FROM t WHERE a >= 3 -- é 😀") as srv:
        result = _chat(srv, ledger=ledger)
    assert result.text == "SELECT name FROM t WHERE a >= 3 -- é 😀" and result.malformed == ""
    assert ledger.summary()["malformed_replies"] == {}
