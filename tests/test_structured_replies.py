"""Structured replies read right: output constraints reach both backends and key the response
cache, a server that ignores or refuses them is survived and counted, a truncated reply is asked
again once and never booked as a parse failure, reasoning and content stay apart, cached prompt
tokens reach the ledger and the cost table, and the preflight says go or no-go. Against the real
loopback OpenAI-compatible server answering as vLLM answers gpt-oss, and the real CPU model."""
import asyncio
import json
import logging
import os
import subprocess
import sys

import pytest

from countermem_jax.method.agents import Agent, MemoryCalls
from countermem_jax.method.agents import TaskContext as AgentTaskContext
from countermem_jax.preflight import checks as preflight
from countermem_jax.backbones.base import (Charge, OutputConstraint, SamplingParams,
                                          TokenLedger)
from countermem_jax.backbones.cache import cache_key
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.method.prompting import constraints, prompts
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.reporting import load, tables
from benchmarks.testing.openai_server import LocalOpenAIServer
from evaluators.base import State, Task
from helpers import agent_config, config_module

ACTION = "SELECT name FROM people WHERE age > 30"
EDIT_FIELDS = {"context": "Table people: name, age.", "question": "List people aged at least 30.",
               "action": ACTION, "feedback": "wrong rows", "k": 2, "unit": "predicate"}
DISTIL_FIELDS = {"context": "c", "question": "t", "original": ACTION,
                 "improved": ACTION.replace(">", ">="), "evidence": "0.0 -> 1.0",
                 "condition_hint": ""}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _client(srv, **kw) -> OpenAICompatibleBackbone:
    return OpenAICompatibleBackbone(srv.base_url, "openai/gpt-oss-120b", ledger=TokenLedger(),
                                    backoff_initial_s=0.01, **kw)


def _call(backbone, template, fields, failures, parse_args, max_tokens=200):
    async def go():
        try:
            return await prompts.call_template(
                backbone, template, fields, charge=Charge("construction", "t#0"),
                params=SamplingParams(max_tokens=max_tokens), parse_args=parse_args,
                failures=failures)
        finally:
            await backbone.aclose()
    return asyncio.run(go())


def _edit_reply(request) -> str:
    return json.dumps({"edits": [{"find": "age > 30", "replace": "age >= 30"}]})


def test_edit_constraint_reaches_the_vllm_request():
    failures = ParseFailureLog()
    with LocalOpenAIServer(gpt_oss_style=True, responder=_edit_reply) as srv:
        parsed = _call(_client(srv), prompts.GENERATE_LOCAL_ALTERNATIVES, EDIT_FIELDS, failures,
                       {"action": ACTION, "k": 2})
        sent = srv.requests[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "local_edits"
    assert sent["json_schema"]["schema"]["properties"]["edits"]["maxItems"] == 2
    assert parsed.ok and parsed.value == ["SELECT name FROM people WHERE age >= 30"]
    assert failures.summary()["GENERATE_LOCAL_ALTERNATIVES"]["constraint_violations"] == 0


def test_an_edit_whose_find_is_not_in_the_action_is_refused_and_counted():
    reply = json.dumps({"edits": [{"find": "age < 99", "replace": "x"},
                                  {"find": "age > 30", "replace": "age >= 30"}]})
    failures = ParseFailureLog()
    with LocalOpenAIServer(gpt_oss_style=True, responder=lambda r: reply) as srv:
        parsed = _call(_client(srv), prompts.GENERATE_LOCAL_ALTERNATIVES, EDIT_FIELDS, failures,
                       {"action": ACTION, "k": 2})
    assert parsed.value == ["SELECT name FROM people WHERE age >= 30"]
    assert failures.summary()["GENERATE_LOCAL_ALTERNATIVES"]["refused_edits"] == 1


def test_the_edit_constraint_offers_only_units_of_the_action():
    """FIND is held to the action's units while decoding; a reply is read against the looser
    schema, so one FIND outside them is refused edit by edit (as above), not the whole reply."""
    from countermem_jax.method.prompting import parsers
    action = "SELECT T1.name, T1.age FROM people AS T1 WHERE T1.age > 30 ORDER BY T1.age DESC"
    units = parsers.edit_units(action)
    assert units and all(u in action and u != action for u in units)
    assert {"T1.age > 30", "T1.age DESC", "FROM people AS T1", "T1.name"} <= set(units)
    with LocalOpenAIServer(gpt_oss_style=True, responder=_edit_reply) as srv:
        _call(_client(srv), prompts.GENERATE_LOCAL_ALTERNATIVES, EDIT_FIELDS, ParseFailureLog(),
              {"action": ACTION, "k": 2})
        sent = srv.requests[-1]["response_format"]["json_schema"]["schema"]
    find = sent["properties"]["edits"]["items"]["properties"]["find"]
    assert find["enum"] == parsers.edit_units(ACTION) and "age > 30" in find["enum"]
    loose = constraints.LOCAL_EDITS.reading(action=ACTION, k=2).schema
    assert "enum" not in loose["properties"]["edits"]["items"]["properties"]["find"]


def test_a_well_formed_reply_without_a_usable_edit_is_counted_apart_from_unparseable():
    from countermem_jax.protocol.construction_tally import tally
    noop = json.dumps({"edits": [{"find": "age > 30", "replace": "age > 30"}]})
    failures = ParseFailureLog()
    with LocalOpenAIServer(gpt_oss_style=True, responder=lambda r: noop) as srv:
        parsed = _call(_client(srv), prompts.GENERATE_LOCAL_ALTERNATIVES, EDIT_FIELDS, failures,
                       {"action": ACTION, "k": 2})
    assert parsed.used_fallback and parsed.value == []
    assert [f["kind"] for f in failures.items] == ["content", "content"]
    counted = tally([], failures.items)
    assert counted["unparseable"] == {}
    assert counted["no_usable_content"] == {"GENERATE_LOCAL_ALTERNATIVES": 2}
    broken = ParseFailureLog()
    with LocalOpenAIServer(gpt_oss_style=True, responder=lambda r: "FIND: nothing") as srv:
        _call(_client(srv), prompts.GENERATE_LOCAL_ALTERNATIVES, EDIT_FIELDS, broken,
              {"action": ACTION, "k": 2})
    assert tally([], broken.items)["unparseable"] == {"GENERATE_LOCAL_ALTERNATIVES": 2}


def test_a_server_that_ignores_the_constraint_is_counted_and_survived():
    failures = ParseFailureLog()
    with LocalOpenAIServer(gpt_oss_style=True, ignore_constraints=True) as srv:
        parsed = _call(_client(srv), baseline_prompts.BEST_OF_N_JUDGE,
                       {"task": "t", "candidates": "1. a\n2. b"}, failures, {"n": 2})
    counts = failures.summary()["BEST_OF_N_JUDGE"]
    assert not parsed.ok and parsed.used_fallback and parsed.value == 1
    assert counts["constraint_violations"] == 2 and counts["parse_failures"] == 2
    assert "output format" in failures.items[0]["error"]


def test_a_server_that_refuses_constraints_is_asked_without_and_it_is_said_once(caplog):
    with LocalOpenAIServer(refuse_constraints=True,
                           responder=lambda r: "SITUATION: s\nCONDITION: none") as srv:
        backbone = _client(srv)
        with caplog.at_level(logging.WARNING):
            for _ in range(2):
                parsed = _call(backbone, prompts.DISTIL_RECORD, DISTIL_FIELDS,
                               ParseFailureLog(), {})
                assert parsed.ok and parsed.value.situation == "s"
        sent = ["response_format" in r for r in srv.requests]
    assert sent == [True, False, False]
    assert sum("not enforced" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("thinking, calls, ok", [(300, 2, True), (1000, 2, False)])
def test_a_truncated_reply_is_retried_once_and_never_a_parse_failure(thinking, calls, ok):
    failures = ParseFailureLog()
    with LocalOpenAIServer(gpt_oss_style=True, reasoning_tokens=thinking) as srv:
        parsed = _call(_client(srv, max_tokens_on_truncation=400), prompts.DISTIL_RECORD,
                       DISTIL_FIELDS, failures, {})
        budgets = [r["max_tokens"] for r in srv.requests]
    counts = failures.summary()["DISTIL_RECORD"]
    first = min(200, prompts.DISTIL_RECORD.max_tokens)   # the call's budget, capped by the template's
    assert budgets == [first, 400] and parsed.attempts == calls and parsed.ok == ok
    assert counts["truncation_retries"] == 1 and counts["truncated"] == (1 if ok else 2)
    assert counts["parse_failures"] == 0 and not failures.items
    assert parsed.truncated == (not ok)


def test_the_truncation_retry_carries_the_repetition_penalty_and_keys_the_cache_by_it():
    """A reply cut off at its budget is mostly a greedy loop: the retry is sent with the
    backbone's repetition penalty, and only a penalty other than 1 changes the cache key."""
    with LocalOpenAIServer(gpt_oss_style=True, reasoning_tokens=300) as srv:
        backbone = _client(srv, max_tokens_on_truncation=400)
        backbone.repetition_penalty_on_truncation = 1.1
        parsed = _call(backbone, prompts.DISTIL_RECORD, DISTIL_FIELDS, ParseFailureLog(), {})
        sent = [r.get("repetition_penalty") for r in srv.requests]
    assert parsed.ok and sent == [None, 1.1]
    plain = SamplingParams(max_tokens=10)
    assert "repetition_penalty" not in plain.to_json()
    assert cache_key("m", [], plain) != cache_key(
        "m", [], SamplingParams(max_tokens=10, repetition_penalty=1.1))


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_both_reasoning_spellings_are_read_apart_from_the_content(field):
    with LocalOpenAIServer(gpt_oss_style=True, reasoning_field=field,
                           responder=lambda r: "YES") as srv:
        result = _client(srv).chat_sync([{"role": "user", "content": "q"}])
    assert result.text == "YES" and result.reasoning.startswith("We need to answer")
    assert result.finish_reason == "stop"


def test_cached_prompt_tokens_reach_the_ledger_the_task_and_the_cost_table():
    with LocalOpenAIServer(gpt_oss_style=True, cached_tokens=5,
                           responder=lambda r: '{"verdict": "YES"}') as srv:
        backbone = _client(srv)
        agent = Agent(backbone, None, None, agent_config())
        task = Task("q1", "sql", "spider", "q", "", "predicate", environment="db")
        ctx = AgentTaskContext(task, "evaluation", "base", State(task), call_budget=3,
                               token_budget=10_000, max_decisions=3)
        params = MemoryCalls(agent).judge_params(prompts_judge_settings())

        async def go():
            try:
                return await agent.chat(ctx, [{"role": "user", "content": "q"}], params,
                                        "CONDITION_JUDGE")
            finally:
                await backbone.aclose()
        asyncio.run(go())
    assert backbone.ledger.summary()["by_phase"]["evaluation"]["cached_tokens"] == 5
    assert ctx.cached_tokens == 5 and srv.requests[0]["response_format"]["json_schema"][
        "name"] == "condition_verdict"
    run = load.Run("w", "countermem", "0", {"q1": {"benchmark": "spider", "tokens": 18,
                                                  "cached_tokens": ctx.cached_tokens,
                                                  "calls": 1}}, None)
    row = tables.cost([load.Arm("react", "CounterMem", "countermem", [run])])[0]
    assert row["cached_tokens_per_task_mean"] == 5


def prompts_judge_settings():
    from helpers import paper
    return paper("judge", max_tokens=64)


def test_the_constraint_is_part_of_the_cache_key():
    messages = [{"role": "user", "content": "q"}]
    plain = cache_key("m", messages, SamplingParams())
    one = cache_key("m", messages, SamplingParams(constraint=constraints.CHOICE.constraint(n=2)))
    other = cache_key("m", messages, SamplingParams(constraint=constraints.CHOICE.constraint(n=3)))
    grammar = cache_key("m", messages, SamplingParams(constraint=OutputConstraint("g", grammar="root ::= \"a\"")))
    assert len({plain, one, other, grammar}) == 4
    assert "constraint" not in SamplingParams().to_json()   # unconstrained keys unchanged


def _config_file(tmp_path, url: str) -> str:
    path = tmp_path / "loopback.py"
    path.write_text(
        "from countermem_jax.protocol import config_files\n\n"
        "def get_config():\n"
        "    c = config_files.load('configs/paper.py:spider,react,gptoss')\n"
        f"    c.backbone.update(base_urls={url!r}, max_concurrency=4)\n"
        "    return c\n")
    return str(path)


@pytest.mark.parametrize("server, verdict", [
    (dict(cached_tokens=5, reasoning_tokens=100), "GO"),
    (dict(ignore_constraints=True, reasoning_tokens=2000), "NO-GO")])
def test_preflight_says_go_or_no_go_against_the_loopback_server(tmp_path, server, verdict):
    with LocalOpenAIServer(gpt_oss_style=True, reasoning_field="reasoning", **server) as srv:
        proc = subprocess.run([sys.executable, "-m", "countermem_jax.preflight",
                               f"--config={_config_file(tmp_path, srv.base_url)}",
                               "--duration_s=0.5"], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    assert f"verdict: {verdict}" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == (0 if verdict == "GO" else 1)
    if verdict == "NO-GO":
        assert "constraint ignored" in proc.stdout and "cut off at max_tokens=1024" in proc.stdout
    else:
        assert "CONDITION_JUDGE" in proc.stdout and "requests/s" in proc.stdout


def test_preflight_library_rows_per_template_of_the_method():
    cfg = config_module("paper.py").gptoss("spider")
    cfg.method = "memgpt"
    assert preflight.templates_of(cfg) == ["DRAFT_ACTION", "MEMGPT_MANAGE", "MEMGPT_RECALL",
                                           "REVISE_WITH_MEMORY"]


def _cpu_model(**kwargs):
    """The real llama.cpp backbone with the pinned CPU model (the test skips without it)."""
    pytest.importorskip("llama_cpp", reason="cpu extra (llama-cpp-python) not installed")
    from countermem_jax.backbones import gguf
    from countermem_jax.backbones.llama_cpp_backbone import LlamaCppBackbone
    try:
        path = gguf.default_model_path()
    except gguf.ModelFileError as err:
        pytest.skip(str(err))
    return LlamaCppBackbone(path, n_ctx=2048, ledger=TokenLedger(), **kwargs)


def test_llama_cpp_constrained_edit_reply_meets_its_schema():
    backbone = _cpu_model()
    seen = []
    inner = backbone._generate

    def spy(messages, params):
        result = inner(messages, params)
        seen.append((params.constraint, result))
        return result
    backbone._generate = spy
    failures = ParseFailureLog()
    parsed = _call(backbone, prompts.GENERATE_LOCAL_ALTERNATIVES, EDIT_FIELDS, failures,
                   {"action": ACTION, "k": 2}, max_tokens=160)
    constraint, result = seen[0]
    assert constraint.name == "local_edits" and result.constrained
    # greedy and seeded: the 0.5B model writes one edit object and stops well inside 160 tokens
    assert result.finish_reason == "stop" and constraints.violation(constraint, result.text) == ""
    assert constraints.json_object(result.text)["edits"][0]["find"] in ACTION
    assert failures.summary()["GENERATE_LOCAL_ALTERNATIVES"]["constraint_violations"] == 0
    assert parsed.ok or parsed.used_fallback


def test_llama_cpp_edit_schema_with_double_quotes_in_the_action_decodes():
    # llama-cpp-python's schema converter left `\` unescaped in GBNF literals: an action with a
    # double-quoted string made a grammar llama.cpp refuses, and the sampler crashed the process
    # (the 1.5B model, on tvshow's `WHERE T2.Directed_by != "Ben Jones"`).
    from countermem_jax.backbones.llama_cpp_backbone import schema_grammar
    action = 'SELECT name FROM people WHERE city != "New \\ York" AND age > 30'
    schema = constraints.LOCAL_EDITS.schema(action=action, k=2)
    assert r'!= \\\"New \\\\ York\\\"' in schema_grammar(schema)   # JSON, then GBNF, escaped
    backbone = _cpu_model()
    failures = ParseFailureLog()
    parsed = _call(backbone, prompts.GENERATE_LOCAL_ALTERNATIVES,
                   dict(EDIT_FIELDS, action=action), failures, {"action": action, "k": 2},
                   max_tokens=160)
    summary = failures.summary().get("GENERATE_LOCAL_ALTERNATIVES", {})
    assert summary.get("constraint_violations", 0) == 0
    assert parsed.ok or parsed.used_fallback


def test_llama_cpp_truncation_retry_decodes_with_the_repetition_penalty():
    backbone = _cpu_model(max_tokens_on_truncation=12)
    backbone.repetition_penalty_on_truncation = 1.1
    sent, inner = [], backbone._llm.create_chat_completion

    def spy(**kwargs):
        out = inner(**kwargs)
        sent.append((kwargs["max_tokens"], kwargs["repeat_penalty"],
                     out["choices"][0]["finish_reason"]))
        return out
    backbone._llm.create_chat_completion = spy
    failures = ParseFailureLog()
    asyncio.run(prompts.checked_chat(
        backbone, [{"role": "user", "content": "Count from one to fifty in words."}],
        SamplingParams(max_tokens=6), Charge("construction", "t#0", "probe"), failures))
    assert sent == [(6, 1.0, "length"), (12, 1.1, "length")]
    assert failures.summary()["probe"]["truncation_retries"] == 1


def test_preflight_refuses_an_unknown_method_in_one_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("from countermem_jax.protocol import config_files\n\ndef get_config():\n"
                    "    c = config_files.load('configs/paper.py:spider,react,gptoss')\n"
                    "    c.method = 'bogus'\n    return c\n")
    proc = subprocess.run([sys.executable, "-m", "countermem_jax.preflight", f"--config={path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("preflight: unknown method 'bogus'")


def test_the_edit_schema_bounds_each_string_by_the_action():
    """A decoder held to the schema cannot loop inside one string until the token budget ends:
    FIND is at most the action (it is copied from it), REPLACE at most that plus a margin."""
    action = "SELECT name FROM people WHERE age > 30"
    c = constraints.LOCAL_EDITS.constraint(action=action, k=4)
    ok = json.dumps({"edits": [{"find": "age > 30", "replace": "age >= 30"}]})
    runaway = json.dumps({"edits": [{"find": "age > 30",
                                     "replace": "age >= 30" + " OR age >= 30" * 20}]})
    assert constraints.violation(c, ok) == "" and constraints.violation(c, runaway)


def test_llama_cpp_servers_500_on_a_json_schema_is_a_refusal_of_that_template_not_retried():
    # llama_cpp.server answers response_format {"type": "json_schema"} with HTTP 500 (a pydantic
    # validation error): it was retried to the end and then ended the phase
    with LocalOpenAIServer(refuse_constraints=True, refuse_like_llama_cpp=True,
                           responder=lambda r: "SITUATION: s\nCONDITION: none") as srv:
        backbone = _client(srv)
        for _ in range(2):
            parsed = _call(backbone, prompts.DISTIL_RECORD, DISTIL_FIELDS, ParseFailureLog(), {})
            assert parsed.ok and parsed.value.situation == "s"
        sent = ["response_format" in r for r in srv.requests]
    assert sent == [True, False, False]
    assert len(backbone.refused) == 1 and backbone.constraints
