"""What a server and its URL file throw at the OpenAI-compatible client (issue 44), injected
against the real loopback server (benchmarks/testing) and real URL files: a prompt past the
context, other 4xx, a constraint one template's schema cannot have, Retry-After, usage numbers
that cannot be true, usage without reasoning tokens, URL files that are wrong or rewritten."""
import asyncio
import json
import os
import pathlib

import pytest

import sweep_fixture
from countermem_jax import cli
from countermem_jax.backbones import factory, served_urls
from countermem_jax.backbones.base import (Charge, OutputConstraint, SamplingParams,
                                          TokenLedger)
from countermem_jax.backbones.cache import CachedBackbone, cache_key
from countermem_jax.backbones.openai_http import (BackboneError, OpenAICompatibleBackbone,
                                                  RequestRejected, context_length_error,
                                                  retry_after_s)
from countermem_jax.method.prompting import prompts
from countermem_jax.method.prompting.failures import ParseFailureLog
from benchmarks.testing.openai_server import LocalOpenAIServer
from helpers import cpu_config, paper_config

MSG = [{"role": "user", "content": "hello"}]
SCHEMA_A = OutputConstraint.from_schema("edits", {"type": "object", "properties": {
    "edits": {"type": "string"}}, "required": ["edits"]})
SCHEMA_B = OutputConstraint.from_schema("verdict", {"type": "object", "properties": {
    "verdict": {"type": "string"}}, "required": ["verdict"]})


def _client(urls, **kw):
    kw.setdefault("backoff_initial_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return OpenAICompatibleBackbone(urls, "openai/gpt-oss-120b", **kw)


def _long(words: int) -> list[dict]:
    return [{"role": "user", "content": "word " * words}]


# ----------------------------------------------------------------------------- context length
@pytest.mark.parametrize("how", ["max_model_len", "context_length", "context_length_llama"])
def test_a_prompt_past_the_context_is_a_failed_request_counted_and_the_run_goes_on(how):
    kw = {"max_model_len": 300} if how == "max_model_len" else {}
    with LocalOpenAIServer(**kw) as srv:
        if how != "max_model_len":
            srv.script.append(how)
        ledger = TokenLedger()
        client = _client(srv.base_url, ledger=ledger)
        failed = client.chat_sync(_long(400), SamplingParams(max_tokens=64),
                                  Charge("construction", "run/t1#0", "DRAFT_ACTION"))
        assert failed.failed == "context_length" and failed.text == ""
        assert len(srv.requests) == 1   # not retried: the same prompt cannot fit later
        fine = client.chat_sync(MSG, SamplingParams(max_tokens=64), Charge("construction"))
        assert fine.text.startswith("echo") and not fine.failed
    summary = ledger.summary()
    assert summary["failed_requests"] == {"construction": {"context_length": 1}}
    assert ledger.calls["construction"] == 2 and ledger.total("construction").total == 18


def test_the_context_error_is_recognised_by_its_structure_not_by_words():
    vllm_old = {"object": "error", "type": "BadRequestError", "code": 400, "message":
                "This model's maximum context length is 32768 tokens. However, you requested "
                "33000 tokens (24808 in the messages, 8192 in the completion)."}
    assert context_length_error(400, json.dumps(vllm_old))
    assert not context_length_error(500, json.dumps(vllm_old))
    assert not context_length_error(400, json.dumps(
        {"error": {"message": "the context of this request is too long for my taste"}}))
    assert not context_length_error(400, "maximum context length is 5 tokens")   # not JSON


def test_a_context_error_on_a_constrained_request_keeps_constraints_on():
    with LocalOpenAIServer(gpt_oss_style=True) as srv:
        srv.script.append("context_length")
        client = _client(srv.base_url)
        params = SamplingParams(max_tokens=64, constraint=SCHEMA_A)
        assert client.chat_sync(MSG, params).failed == "context_length"
        again = client.chat_sync(MSG, params)
        assert again.constrained and "response_format" in srv.requests[-1]
        assert client.refused == set()


def test_a_truncation_retry_past_the_context_keeps_the_first_reply():
    """The larger budget of the retry (8,192 on gpt-oss) is what pushes a long prompt past the
    context: the cut reply already received is used, not an empty one."""
    with LocalOpenAIServer(max_model_len=600) as srv:
        client = _client(srv.base_url)
        client.max_tokens_on_truncation = 4096

        async def run():
            srv_reply = srv.reply
            srv.reply = lambda request: {**srv_reply(request), "choices": [
                {**srv_reply(request)["choices"][0], "finish_reason": "length"}]}
            return await prompts.checked_chat(client, MSG, SamplingParams(max_tokens=64),
                                              Charge("evaluation", "r/t#0", "DRAFT_ACTION"),
                                              ParseFailureLog())
        result, _, calls = asyncio.run(run())
    assert calls == 2 and result.text.startswith("echo") and not result.failed


def test_other_client_errors_stay_fatal_and_name_the_task():
    with LocalOpenAIServer(default="400") as srv:
        client = _client(srv.base_url)
        with pytest.raises(RequestRejected, match=r"not retried.*task run/t7#2, template "
                                                  r"DRAFT_ACTION, phase evaluation"):
            client.chat_sync(MSG, charge=Charge("evaluation", "run/t7#2", "DRAFT_ACTION"))
        assert len(srv.requests) == 1


# ----------------------------------------------------------------------------- constraints
def test_a_refused_constraint_is_dropped_for_its_template_only():
    with LocalOpenAIServer(gpt_oss_style=True, refuse_constraint_names={"edits"}) as srv:
        client = _client(srv.base_url)
        first = client.chat_sync(MSG, SamplingParams(constraint=SCHEMA_A))
        assert not first.constrained and client.refused == {"edits"}
        other = client.chat_sync(MSG, SamplingParams(constraint=SCHEMA_B))
        assert other.constrained and srv.requests[-1]["response_format"]["json_schema"][
            "name"] == "verdict"
        again = client.chat_sync(MSG, SamplingParams(constraint=SCHEMA_A))
        assert not again.constrained and "response_format" not in srv.requests[-1]
        assert len(srv.requests) == 4   # refused once, asked without, then never sent again


def test_the_cache_keys_a_reply_by_what_was_sent(tmp_path):
    with LocalOpenAIServer(gpt_oss_style=True, refuse_constraint_names={"edits"}) as srv:
        cached = CachedBackbone(_client(srv.base_url), tmp_path)
        params = SamplingParams(constraint=SCHEMA_A)
        assert not cached.chat_sync(MSG, params).constrained
        sent = cache_key(cached.model_name, MSG, SamplingParams())
        asked = cache_key(cached.model_name, MSG, params)
        assert (tmp_path / sent[:2] / f"{sent}.json").exists()
        assert not (tmp_path / asked[:2] / f"{asked}.json").exists()
        # a server that enforces the constraint is not answered from the unconstrained entry
        with LocalOpenAIServer(gpt_oss_style=True) as enforcing:
            fresh = CachedBackbone(_client(enforcing.base_url), tmp_path)
            reply = fresh.chat_sync(MSG, params)
            assert reply.constrained and not reply.cached and len(enforcing.requests) == 1


# ----------------------------------------------------------------------------- Retry-After
@pytest.mark.parametrize("behavior, at_least", [("retry_after:1", 0.95),
                                                ("retry_after_date:2", 0.5)])
def test_retry_after_is_waited_before_the_next_attempt(behavior, at_least):
    with LocalOpenAIServer() as srv:
        srv.script.append(behavior)
        result = _client(srv.base_url, max_attempts=2).chat_sync(MSG)
        assert result.text.startswith("echo") and len(srv.arrivals) == 2
        assert srv.arrivals[1] - srv.arrivals[0] >= at_least


def test_retry_after_sends_the_retry_to_a_replica_outside_its_window():
    with LocalOpenAIServer(name="busy") as busy, LocalOpenAIServer(name="free") as free:
        busy.script.append("retry_after:60")
        client = _client([busy.base_url, free.base_url], max_attempts=2)
        client.replicas[1].requests = 1   # the busy one is picked first
        assert "from free" in client.chat_sync(MSG).text
        assert "from free" in client.chat_sync(MSG).text   # busy stays out for its window
        assert len(busy.requests) == 1


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after_s("3") == 3.0 and retry_after_s(None) is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_s("99999") == 300.0 and retry_after_s("soon") is None


# ----------------------------------------------------------------------------- usage
@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -5, "completion_tokens": 7},
    {"prompt_tokens": 11, "completion_tokens": 3.5},
    {"prompt_tokens": "11", "completion_tokens": 7},
    {"prompt_tokens": 11, "completion_tokens": 10 ** 9},
    {"prompt_tokens": 11, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 50}},
    {"prompt_tokens": 11, "completion_tokens": 7,
     "completion_tokens_details": {"reasoning_tokens": -1}}])
def test_usage_that_cannot_be_true_is_counted_and_not_booked(usage):
    with LocalOpenAIServer(usage=usage) as srv:
        ledger = TokenLedger()
        result = _client(srv.base_url, ledger=ledger).chat_sync(MSG, charge=Charge("evaluation"))
    assert "usage_invalid" in result.malformed and result.usage.source == "tokenizer"
    booked = ledger.total("evaluation")
    assert 0 < booked.prompt_tokens < 100 and 0 < booked.completion_tokens < 100
    assert ledger.summary()["malformed_replies"] == {"evaluation": 1}


def test_the_bound_follows_the_servers_context():
    usage = {"prompt_tokens": 40_000, "completion_tokens": 7}
    with LocalOpenAIServer(usage=usage) as srv:
        assert _client(srv.base_url).chat_sync(MSG).usage.prompt_tokens == 40_000
        small = _client(srv.base_url, max_model_len=2048).chat_sync(MSG)
        assert small.usage.source == "tokenizer" and "usage_invalid" in small.malformed


def test_reasoning_tokens_the_server_does_not_report_are_left_out_not_zero():
    with LocalOpenAIServer(reasoning_details=False) as srv:
        ledger = TokenLedger()
        result = _client(srv.base_url, ledger=ledger).chat_sync(MSG, charge=Charge("evaluation"))
    assert result.usage.reasoning_tokens is None and result.usage.source == "server"
    row = ledger.summary()["by_phase"]["evaluation"]
    assert "reasoning_tokens" not in row and row["total"] == 18


# ----------------------------------------------------------------------------- URL file
@pytest.mark.parametrize("content, defect", [
    (b"127.0.0.1:8000/v1 max_num_seqs=256\n", "line 1: '127.0.0.1:8000/v1' has no http://"),
    (b"http://127.0.0.1:8000/v1 max_num_seqs=lots\n", "line 1: max_num_seqs='lots' is not"),
    (b"http://127.0.0.1:8000/v1 max_num_seqs=-4\n", "line 1: max_num_seqs='-4' is not"),
    (b"http://127.0.0.1:8000/v1 max_num_seqs=0\n", "line 1: max_num_seqs='0' is not"),
    (b"http://127.0.0.1:8000/v1\xff\n", "is not UTF-8 text (byte 0xff at offset 24)")])
def test_a_bad_url_file_is_refused_in_one_line_per_defect(tmp_path, content, defect, capsys):
    urls = tmp_path / "vllm_urls.txt"
    urls.write_bytes(content)
    cfg = sweep_fixture.get_config().backbone
    cfg.base_urls = str(urls)
    with pytest.raises(SystemExit) as ended, cli.one_line_errors():
        factory.make_backbone(cfg)
    assert ended.value.code == 1
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and line.startswith("error: ") and defect in line


def test_every_defect_of_a_url_file_is_named(tmp_path):
    urls = tmp_path / "vllm_urls.txt"
    urls.write_text("localhost:8000/v1 max_num_seqs=256\n# a comment\n"
                    "http://127.0.0.1:8001/v1 max_num_seqs=x\n")
    with pytest.raises(served_urls.UrlFileError) as err:
        served_urls.read(str(urls))
    assert err.value.defects == [
        "line 1: 'localhost:8000/v1' has no http:// or https:// scheme "
        "(write http://localhost:8000/v1)",
        "line 3: max_num_seqs='x' is not a whole number ≥ 1"]


@pytest.mark.parametrize("value", ["", "   ", (), ("http://a:1/v1", "b:2/v1"), "c:3/v1"])
def test_blank_or_schemeless_base_urls_are_one_line(value, capsys):
    with pytest.raises(SystemExit), cli.one_line_errors():
        served_urls.read(value)
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and ("blank" in line or "no http:// or https://" in line)


def test_a_rewritten_url_file_moves_the_client_to_the_new_replica(tmp_path):
    urls = tmp_path / "vllm_urls.txt"
    with LocalOpenAIServer(name="new") as new:
        with LocalOpenAIServer(name="old") as old:
            urls.write_text(f"{old.base_url} max_num_seqs=8\n")
            cfg = sweep_fixture.get_config().backbone
            cfg.update(base_urls=str(urls), max_attempts=3)
            client = factory.make_backbone(cfg)
            client.url_watch.every_s = 0.0
            assert "from old" in client.chat_sync(MSG).text
        # the old replica is gone; serve_vllm.sh rewrites the file with the restarted one
        tmp = urls.with_suffix(".tmp")
        tmp.write_text(f"{new.base_url} max_num_seqs=8\n")
        os.replace(tmp, urls)
        assert "from new" in client.chat_sync(MSG).text
        assert [r.url for r in client.replicas] == [new.base_url]


def test_a_rewrite_that_cannot_be_read_keeps_the_replicas(tmp_path):
    urls = tmp_path / "vllm_urls.txt"
    with LocalOpenAIServer(name="kept") as srv:
        urls.write_text(f"{srv.base_url}\n")
        cfg = sweep_fixture.get_config().backbone
        cfg.base_urls = str(urls)
        client = factory.make_backbone(cfg)
        client.url_watch.every_s = 0.0
        urls.write_text("half-written:80")
        assert "from kept" in client.chat_sync(MSG).text
        urls.unlink()
        assert "from kept" in client.chat_sync(MSG).text


# ----------------------------------------------------------------------------- through a phase
class _TooLongEdits(sweep_fixture.ScriptedServer):
    """The scripted model, except that every request for local edits is refused as vLLM
    refuses a prompt past ``--max-model-len``."""

    def over_context(self, request):
        return "Propose up to" in request["messages"][-1]["content"]


def test_build_memory_goes_on_past_a_prompt_that_does_not_fit(tmp_path):
    from countermem_jax import experiment
    from countermem_jax.phases import Workdir
    cfg = sweep_fixture.get_config()
    cfg.data.data_dir = str(tmp_path / "data")
    cfg.splits.manifest = str(sweep_fixture.write_manifest(tmp_path / "manifest.json"))
    urls = tmp_path / "vllm_urls.txt"
    with _TooLongEdits() as server:
        urls.write_text(f"{server.base_url} max_num_seqs=4\n")
        cfg.backbone.base_urls = str(urls)
        experiment.build_memory(cfg, tmp_path / "wd")
        asked = [r for r in server.requests if "Propose up to" in r["messages"][-1]["content"]]
    assert asked, "the case tested nothing: no edits were asked for"
    [end] = [e for e in Workdir(tmp_path / "wd").log.events("phase_end")
             if e.get("phase") == "construction"]
    assert end["ledger"]["failed_requests"] == {"construction": {"context_length": len(asked)}}


# ----------------------------------------------------------------------------- sampling
def _agent_requests(cfg, runs=("base", "countermem"), tasks=("t1", "t2")) -> list[dict]:
    """The request bodies an agent of ``cfg`` sends for one reflection per (run, task), against
    the loopback server."""
    import types
    from countermem_jax.method.agents import Agent, AgentConfig, TaskContext
    with LocalOpenAIServer(responder=lambda request: '{"reflection": "check the bound"}') as srv:
        agent = Agent(_client(srv.base_url), None, None, AgentConfig(**cfg.agent.to_dict()))

        async def run():
            for run_name in runs:
                for task_id in tasks:
                    ctx = TaskContext(types.SimpleNamespace(task_id=task_id), "evaluation",
                                      run_name, None, 3, 10_000, 3)
                    await agent.llm(ctx, prompts.REFLEXION_REFLECT, {
                        "context": "c", "question": "q", "action": "a", "feedback": "f"})
            await agent.backbone.aclose()
        asyncio.run(run())
        return list(srv.requests)


def test_gpt_oss_samples_with_a_seed_per_task_and_the_cpu_configs_stay_greedy():
    gpt = _agent_requests(paper_config("spider,react,gptoss"))
    assert {(r["temperature"], r["top_p"]) for r in gpt} == {(1.0, 1.0)}
    seeds = [r["seed"] for r in gpt]   # base t1, base t2, countermem t1, countermem t2
    assert seeds[:2] == seeds[2:] and seeds[0] != seeds[1]   # per task, the same in each run
    cpu = _agent_requests(cpu_config("react"))
    assert {(r["temperature"], r["seed"]) for r in cpu} == {(0.0, 0)}


# ----------------------------------------------------------------------------- preflight
@pytest.mark.parametrize("max_model_len", [120, 32768])
def test_the_preflight_sets_the_longest_prompt_against_max_model_len(tmp_path, max_model_len):
    from countermem_jax.preflight import checks as preflight_checks
    cfg = sweep_fixture.get_config()
    cfg.data.data_dir = str(tmp_path)
    with LocalOpenAIServer(gpt_oss_style=True, max_model_len=max_model_len,
                           model_id="scripted") as srv:
        cfg.backbone.base_urls = srv.base_url
        report = preflight_checks.run(cfg, duration_s=0.2, concurrency=2)
    context = report.context
    longest, task = preflight_checks.longest_prompt(cfg)
    assert (context.prompt_tokens, context.task, context.max_model_len) == (
        longest, task, max_model_len) and longest > 50
    text = preflight_checks.render(report)
    assert f"context: longest prompt {longest} tokens (task {task})" in text
    over = [p for p in report.problems if p.startswith("context: ")]
    if max_model_len < longest + context.max_tokens:
        assert over and "exceed max_model_len=120" in over[0] and "verdict: NO-GO" in text
    else:
        assert not over and f"of max_model_len {max_model_len}" in text


def test_the_preflight_says_when_the_prompts_cannot_be_measured(tmp_path):
    from countermem_jax.preflight import checks as preflight_checks
    cfg = sweep_fixture.get_config()
    cfg.data.benchmark = "no_such_benchmark"
    with LocalOpenAIServer(gpt_oss_style=True) as srv:
        cfg.backbone.base_urls = srv.base_url
        report = preflight_checks.run(cfg, duration_s=0.2, concurrency=2)
    assert report.context.prompt_tokens is None and report.context.max_model_len is None
    assert "longest prompt not measured (the benchmark's tasks could not be loaded" in \
        preflight_checks.render(report)
