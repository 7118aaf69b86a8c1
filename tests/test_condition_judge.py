"""The free-text condition judge on a reasoning model: its own sampling settings,
robust YES/NO parsing, undecided verdicts counted and decided by policy, calls made without
blocking the event loop and charged to the deciding decision. Against a real loopback
OpenAI-compatible server that answers like gpt-oss (a reasoning field, short or empty content)."""
import asyncio
import re

import pytest

from countermem_jax.method.agents import Agent, MemoryCalls
from countermem_jax.method.agents import TaskContext as AgentTaskContext
from countermem_jax.backbones.base import Backbone, ChatResult, TokenLedger, Usage
from countermem_jax.backbones.cache import CachedBackbone
from countermem_jax.testing.openai_server import LocalOpenAIServer
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.conditions.checkers import (CompositeChecker, LLMJudgeChecker,
                                                 RuleChecker, parse_verdict)
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.method.selector import policies
from evaluators.base import State, Task
from helpers import agent_config, make_record, paper

CONDITION = "the request asks about people who are at least some age (an inclusive bound)"


class ReasoningServer(LocalOpenAIServer):
    """Answers the condition judge like a reasoning model: with too few tokens it is still
    thinking (empty content, finish_reason "length"); with enough it states a verdict in its
    reasoning and returns a short or empty content, per ``style``."""

    def __init__(self, style: str = "bold", **kw):
        super().__init__(**kw)
        self.style = style

    def reply(self, request: dict) -> dict:
        prompt = request["messages"][-1]["content"]
        task = re.search(r"<task>\n(.*)\n</task>", prompt, re.S).group(1)
        holds = "at least" in task
        word = "YES" if holds else "NO"
        if request.get("max_tokens", 0) < 64:
            content, reasoning, finish = "", "We need to check whether the condition", "length"
        elif self.style == "bold":
            content, reasoning, finish = f"**{word.title()}**", "Check the bound.", "stop"
        elif self.style == "empty":
            content, finish = "", "stop"
            reasoning = (f"Should I answer YES or NO? The task says {task[:40]!r}. "
                         f"So the answer is {word}.")
        else:  # "undecided": thinks aloud, never states an answer
            content, reasoning, finish = "", "YES or NO... it depends on the schema.", "stop"
        message = {"role": "assistant", "content": content, self.reasoning_field: reasoning}
        return {"id": "x", "object": "chat.completion", "model": request.get("model", "m"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70,
                          "completion_tokens_details": {"reasoning_tokens": 15}}}


def _task(task_id: str, question: str) -> Task:
    return Task(task_id, "sql", "spider", question, "", "join / predicate", environment="db")


def _setup(url, unknown="exclude", settings=None, cache_dir=None, effort="medium"):
    backbone = OpenAICompatibleBackbone(url, "openai/gpt-oss-120b", reasoning_effort=effort,
                                        ledger=TokenLedger(), backoff_initial_s=0.01)
    if cache_dir is not None:
        backbone = CachedBackbone(backbone, cache_dir)
    agent = Agent(backbone, None, None, agent_config())
    record = make_record(source_task_id="src", condition=CONDITION,
                         situation="List the names of people older than a threshold")
    index = RetrievalIndex([record], checker=CompositeChecker(
        [RuleChecker(), LLMJudgeChecker(settings or paper("judge"))], unknown))
    aug = CounterMemAugmentation(MemoryCalls(agent), index_source=lambda: index,
                                 selector=policies.make_fixed("always_skip"))
    return backbone, aug, record


def _ctx(task: Task, run="countermem") -> AgentTaskContext:
    return AgentTaskContext(task, "evaluation", run, State(task), call_budget=3,
                            token_budget=10_000, max_decisions=3)


async def _decide(aug, *tasks):
    ctxs = [_ctx(t) for t in tasks]
    infos = await asyncio.gather(*(aug.decide(c, "SELECT name FROM people") for c in ctxs))
    return ctxs, infos


@pytest.mark.parametrize("style", ["bold", "empty"])
def test_a_false_condition_filters_the_record_on_a_reasoning_model(style):
    with ReasoningServer(style) as srv:
        backbone, aug, record = _setup(srv.base_url)
        (ctx_false, ctx_true), (false, true) = asyncio.run(_decide(
            aug, _task("q1", "List people strictly older than 30."),
            _task("q2", "List people aged at least 30.")))
        assert false.log["excluded_condition"] == [record.record_id]
        assert not false.log["retrieved"]
        assert true.log["excluded_condition"] == [] and true.log["retrieved"]
        assert false.log["conditions"] == {"compatible": 0, "incompatible": 1, "undecided": 0,
                                           "judged_by_llm": 1, "judge_calls": 1,
                                           "judge_tokens": 70}
        # the judge's own sampling, not the agent's: room to think, low effort
        judge_requests = [r for r in srv.requests if "<condition>" in r["messages"][-1]["content"]]
        assert {(r["max_tokens"], r["reasoning_effort"]) for r in judge_requests} == {(1024, "low")}
        # charged to the deciding decision and the task run
        assert ctx_false.tokens == 70 and ctx_true.tokens == 70
        assert ctx_false.llm_calls == 1 and ctx_true.llm_calls == 1  # booked via Agent.chat
        assert backbone.ledger.by_decision["countermem/q1#0"].total == 70
        assert backbone.ledger.by_purpose["CONDITION_JUDGE"].total == 140


def test_the_judge_does_not_block_the_event_loop():
    with ReasoningServer("bold", latency_s=0.2) as srv:
        _, aug, _ = _setup(srv.base_url)
        asyncio.run(_decide(aug, _task("a", "people aged at least 3"),
                            _task("b", "people older than 4"), _task("c", "at least 5 people")))
        assert srv.peak_in_flight == 3  # the three decisions' judge calls were in flight at once


def test_a_judge_with_too_few_tokens_is_undecided_and_the_policy_decides():
    tight = paper("judge", max_tokens=8)  # what the judge asked for before: still thinking
    with ReasoningServer("bold") as srv:
        _, aug, record = _setup(srv.base_url, unknown="exclude", settings=tight)
        _, (info,) = asyncio.run(_decide(aug, _task("q", "List people aged at least 30.")))
        assert info.log["conditions"]["undecided"] == 1
        assert info.log["excluded_condition"] == [record.record_id]
        _, aug, record = _setup(srv.base_url, unknown="include", settings=tight)
        _, (info,) = asyncio.run(_decide(aug, _task("q", "List people strictly above 30.")))
        assert info.log["conditions"]["undecided"] == 1 and info.log["retrieved"]


def test_undecided_reasoning_is_counted():
    with ReasoningServer("undecided") as srv:
        _, aug, _ = _setup(srv.base_url)
        _, (info,) = asyncio.run(_decide(aug, _task("q", "List people aged at least 30.")))
        assert info.log["conditions"]["undecided"] == 1 and not info.log["retrieved"]


def test_verdicts_are_judged_once_per_task_run():
    with ReasoningServer("bold") as srv:
        backbone, aug, _ = _setup(srv.base_url)
        task = _task("q", "List people aged at least 30.")
        ctx = _ctx(task)

        async def two_decisions():
            await aug.decide(ctx, "SELECT 1")
            ctx.decision = 1
            return await aug.decide(ctx, "SELECT 2")
        second = asyncio.run(two_decisions())
        assert second.log["conditions"]["judge_calls"] == 0
        assert second.log["conditions"]["compatible"] == 1
        asyncio.run(aug.decide(_ctx(task, run="other-run"), "SELECT 1"))
        assert backbone.ledger.calls["evaluation"] == 2  # a new run judges (and pays) again


@pytest.mark.parametrize("content, reasoning, expected", [
    ("YES", "", True), ("no", "", False), ("**Yes**", "", True), ("Answer: no", "", False),
    ("The answer is YES.", "", True), ("```\nNO\n```", "", False), ("- **NO** -", "", False),
    ("Final answer: **yes**", "", True), ("", "so the answer is NO.", False),
    ("", "Thinking about YES or NO.\nYES", True), ("", "YES or NO? Hard to tell.", None),
    ("maybe", "", None), ("", "", None), ("Yes and no.", "", True),
    ("It could be yes, could be no", "", None), ("", "We must respond with NO.", False),
])
def test_parse_verdict(content, reasoning, expected):
    assert parse_verdict(content, reasoning) is expected


def test_run_metrics_sum_the_verdicts_of_every_decision():
    from countermem_jax.protocol import metrics
    ends = [{"task_id": "a", "solved": True, "calls": 1, "failures": 0, "tokens": 90}]
    decisions = [{"memory": {"covered": True, "conditions": {
        "compatible": 1, "incompatible": 2, "undecided": 1, "judged_by_llm": 3, "judge_calls": 3,
        "judge_tokens": 210}}}, {"memory": {"covered": False}}]
    verdicts = metrics.run_metrics(ends, decisions)["condition_verdicts"]
    assert verdicts == {"compatible": 1, "incompatible": 2, "undecided": 1, "judged_by_llm": 3,
                        "judge_calls": 3, "judge_tokens": 210}


def test_judge_effort_through_the_response_cache_and_only_where_the_server_takes_one(tmp_path):
    with ReasoningServer("bold") as srv:
        _, aug, _ = _setup(srv.base_url, cache_dir=tmp_path / "cache")
        asyncio.run(_decide(aug, _task("q", "List people aged at least 30.")))
        _, aug, _ = _setup(srv.base_url, effort=None)  # e.g. a llama.cpp server: no effort sent
        asyncio.run(_decide(aug, _task("q", "List people aged at least 30.")))
        assert [r.get("reasoning_effort") for r in srv.requests] == ["low", None]


def test_own_task_records_are_not_judged():
    with ReasoningServer("bold") as srv:
        _, aug, record = _setup(srv.base_url)
        _, (info,) = asyncio.run(_decide(aug, _task("src", "List people aged at least 30.")))
        assert not srv.requests and "conditions" not in info.log
        assert info.log["excluded_same_task"] == [record.record_id]


FREE_TEXT = ["the request wants an inclusive bound on age", "the tables are joined on ids",
             "the request counts distinct names", "the inclusive bound applies to the year",
             "the query orders by salary"]


def test_distinct_conditions_are_judged_together_with_sequential_verdicts():
    def reply(prompt):
        return "YES" if "inclusive" in prompt else ("maybe" if "salary" in prompt else "NO")

    async def sequential(conditions, task):   # the reference: one condition per call
        checker, counts = CompositeChecker([RuleChecker(), LLMJudgeChecker(paper("judge"))]), []

        async def ask(prompt):
            return reply(prompt)
        for c in conditions:
            counts.append(await checker.judge_pending([c], task, ask))
        return checker, counts

    async def together(conditions, task):
        checker = CompositeChecker([RuleChecker(), LLMJudgeChecker(paper("judge"))])
        started, all_started = [], asyncio.Event()

        async def ask(prompt):
            started.append(prompt)
            if len(started) == len(FREE_TEXT):
                all_started.set()
            await asyncio.wait_for(all_started.wait(), timeout=10)  # all five in flight at once
            await asyncio.sleep(0.001 * (len(FREE_TEXT) - len(started)))
            return reply(prompt)
        counts = await checker.judge_pending(conditions, task, ask)
        return checker, counts, started

    task = TaskFacts("a", "List people aged at least 30.", {"bound": "inclusive"}, "run")
    conditions = [FREE_TEXT[0], "bound == inclusive", *FREE_TEXT, FREE_TEXT[2], " "]
    checker, counts, started = asyncio.run(together(conditions, task))
    reference, one_by_one = asyncio.run(sequential(dict.fromkeys(c.strip() for c in conditions
                                                                 if c.strip()), task))
    assert [re.search(r"<condition>\n(.*)\n</condition>", p).group(1) for p in started] == FREE_TEXT
    assert (counts.compatible, counts.incompatible, counts.undecided, counts.judged_by_llm) == (
        sum(c.compatible for c in one_by_one), sum(c.incompatible for c in one_by_one),
        sum(c.undecided for c in one_by_one), sum(c.judged_by_llm for c in one_by_one)) == \
        (3, 2, 1, 5)   # two inclusive + the rule; joined/distinct NO; salary undecided
    assert checker.judge._cache == reference.judge._cache


class _HeldReplies(Backbone):
    """Holds every judge call until ``n`` have started, then answers them in start order or in
    reverse; replies and usage depend only on the prompt."""
    model_name = "fake"

    def __init__(self, n: int, reverse: bool):
        super().__init__(TokenLedger())
        self.n, self.reverse, self.started, self.finished = n, reverse, [], []
        self._done = [asyncio.Event() for _ in range(n)]
        self._all_started = asyncio.Event()

    async def _chat(self, messages, params):
        prompt = messages[-1]["content"]
        me = len(self.started)
        self.started.append(prompt)
        if len(self.started) == self.n:
            self._all_started.set()
        await asyncio.wait_for(self._all_started.wait(), timeout=10)
        after = me + 1 if self.reverse else me - 1
        if 0 <= after < self.n:
            await asyncio.wait_for(self._done[after].wait(), timeout=10)
        self.finished.append(prompt)
        self._done[me].set()
        condition = re.search(r"<condition>\n(.*)\n</condition>", prompt, re.S).group(1)
        return ChatResult("YES" if "inclusive" in condition else "NO", "",
                          Usage(40 + len(condition), 3 + len(condition) % 7, 0, "server"), "fake")


def test_charges_and_logs_do_not_depend_on_the_order_replies_arrive():
    def run(reverse: bool):
        backbone = _HeldReplies(len(FREE_TEXT), reverse)
        agent = Agent(backbone, None, None, agent_config())
        records = [make_record(source_task_id=f"src{i}", condition=c, situation=f"case {i}")
                   for i, c in enumerate(FREE_TEXT)]
        index = RetrievalIndex(records, checker=CompositeChecker(
            [RuleChecker(), LLMJudgeChecker(paper("judge"))]))
        aug = CounterMemAugmentation(MemoryCalls(agent), index_source=lambda: index,
                                     selector=policies.make_fixed("always_skip"))
        (ctx,), (info,) = asyncio.run(_decide(aug, _task("q", "List people aged at least 30.")))
        return backbone, ctx, info

    forward, ctx_f, info_f = run(reverse=False)
    backward, ctx_b, info_b = run(reverse=True)
    assert backward.finished == forward.finished[::-1] != forward.finished   # order did differ
    assert forward.started == backward.started
    assert info_f.log == info_b.log and info_f.log["conditions"]["judge_calls"] == 5
    assert info_f.log["conditions"]["compatible"] == 2
    assert forward.ledger.summary() == backward.ledger.summary()
    assert forward.ledger.by_decision == backward.ledger.by_decision
    assert forward.ledger.by_purpose == backward.ledger.by_purpose
    assert (ctx_f.tokens, ctx_f.llm_calls) == (ctx_b.tokens, ctx_b.llm_calls) != (0, 0)
    assert info_f.log["conditions"]["judge_tokens"] == ctx_f.tokens
