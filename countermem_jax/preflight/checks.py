"""Preflight: do the servers a config names answer every template of its method as the run needs?

Before a multi-hour build on a GPU host (paper §4.1's served gpt-oss-120b), one request per
template of the config's method (Appendix D.8), each with its output constraint and the
configured token budget, checks that reasoning and content arrive apart, that the constraint
was honoured and that no reply was cut off; then requests and completion tokens per second are
measured at the configured concurrency, with replies bounded to ``THROUGHPUT_MAX_TOKENS`` so
that they finish inside the measurement, in all and per URL (a URL that finished no request is a
problem). Before either, the setting's longest prompt (the first draft of each of its
benchmark's tasks, counted with the gpt-oss tokenizer) plus the draft's token budget is set
against the servers' ``max_model_len`` (vLLM's ``/v1/models``): a prompt that cannot fit would
be refused at every attempt (``context_length``). ``run`` returns the rows and the verdict;
``render`` prints them; ``__main__.py`` is the binary.
"""
import collections
import asyncio
import dataclasses
import string
import time

import aiohttp

from countermem_jax.backbones import factory, tokens
from countermem_jax.backbones.base import Backbone, Charge, SamplingParams
from countermem_jax.baselines import prompts
from countermem_jax.method.prompting import constraints
from countermem_jax.method.conditions import checkers as conditions

# The templates each method calls besides the base agent's draft (and Reflexion's reflection).
_MEMORY = ["REVISE_WITH_MEMORY"]
METHOD_TEMPLATES = {
    "none": [],
    "countermem": ["GENERATE_LOCAL_ALTERNATIVES", "DISTIL_RECORD", "REVISE_WITH_RECORD",
                   "CONDITION_JUDGE"],
    "best_of_n": ["GENERATE_LOCAL_ALTERNATIVES", "BEST_OF_N_JUDGE"],
    "expel": ["EXPEL_UPDATE"] + _MEMORY,
    "generative_agents": ["GENERATIVE_AGENTS_REFLECT", "GENERATIVE_AGENTS_IMPORTANCE"] + _MEMORY,
    "voyager": ["VOYAGER_SKILL"] + _MEMORY,
    "memgpt": ["MEMGPT_MANAGE", "MEMGPT_RECALL"] + _MEMORY,
    "reasoningbank": ["REASONINGBANK_EXTRACT", "REASONINGBANK_JUDGE"] + _MEMORY,
    "reasoningbank_matts": ["MATTS_SELF_CONTRAST", "REASONINGBANK_JUDGE"] + _MEMORY,
    "reasoningbank_verified": ["REASONINGBANK_VERIFIED"] + _MEMORY,
}

# A small text-to-SQL decision: every template's fields are filled from it.
_ACTION = "SELECT name FROM people WHERE age > 30"
_SAMPLE = {"task": "List the names of people aged at least 30 (table people: name, age).",
           "context": "Table people: name, age.",
           "question": "List the names of people aged at least 30.",
           "action": _ACTION, "draft": _ACTION, "original": _ACTION,
           "improved": "SELECT name FROM people WHERE age >= 30", "unit": "predicate", "k": 2,
           "feedback": "wrong result: 3 rows expected, 2 returned", "n": 2,
           "candidates": f"1. {_ACTION}\n2. SELECT name FROM people WHERE age >= 30"}
_PARSE_ARGS = {"GENERATE_LOCAL_ALTERNATIVES": {"action": _ACTION, "k": 2},
               "BEST_OF_N_JUDGE": {"n": 2}, "EXPEL_UPDATE": {"n": 1},
               "MEMGPT_MANAGE": {"allowed": ("core_memory_append", "archival_memory_insert")},
               "MEMGPT_RECALL": {"allowed": ("archival_memory_search",)}}
# The per-request timeout of the preflight (``request_timeout_s``): a sequence decodes at about
# this many tokens per second in a full batch (our assumption for gpt-oss-120b at hundreds of
# requests in flight per replica; a slower server only makes the timeout generous), after up to
# PREFLIGHT_QUEUE_S of prefill and queueing; a low reasoning effort spends about half the budget.
PREFLIGHT_TOKENS_PER_S = 20.0
PREFLIGHT_QUEUE_S = 30.0
EFFORT_SHARE = {"low": 0.5, "medium": 1.0, "high": 1.0}
# Completion tokens of each throughput request: short enough to finish within the measurement
# at a full batch's pace (PREFLIGHT_TOKENS_PER_S), long enough for decoding to dominate prefill.
THROUGHPUT_MAX_TOKENS = 256
# Markers of a reasoning trace left in the content (no reasoning parser on the server).
_TRACE_MARKERS = ("<|channel|>", "<|start|>", "<think>", "assistantfinal")


@dataclasses.dataclass
class Row:
    """One template's request: what came back and which checks failed (``problems``)."""
    template: str
    constraint: str
    max_tokens: int
    finish: str = ""
    reasoning: str = ""        # "apart" | "none" | "mixed"
    honoured: str = "n/a"      # "yes" | "no" | "n/a"
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    problems: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Context:
    """The setting's longest prompt against the servers' context: ``prompt_tokens`` of the
    longest first draft (task ``task``), the draft's ``max_tokens`` and the truncation retry's
    ``retry_tokens``, the smallest ``max_model_len`` the replicas report (None: not said);
    ``note`` says why something could not be measured."""
    prompt_tokens: int | None = None
    task: str = ""
    max_tokens: int = 0
    retry_tokens: int = 0
    max_model_len: int | None = None
    note: str = ""

    @property
    def problems(self) -> list[str]:
        """A prompt and its draft budget past the context (a NO-GO); none when unmeasured."""
        if self.prompt_tokens is None or not self.max_model_len:
            return []
        if self.prompt_tokens + self.max_tokens > self.max_model_len:
            return [f"the longest prompt ({self.prompt_tokens} tokens, task {self.task}) and "
                    f"max_tokens={self.max_tokens} exceed max_model_len={self.max_model_len}: "
                    "its requests fail (context_length); serve a longer --max-model-len"]
        return []

    def line(self) -> str:
        """The report's context line."""
        if self.prompt_tokens is None:
            return f"context: longest prompt not measured ({self.note})"
        used = self.prompt_tokens + self.max_tokens
        limit = (f"of max_model_len {self.max_model_len}" if self.max_model_len
                 else "(max_model_len not reported by the server)")
        text = (f"context: longest prompt {self.prompt_tokens} tokens (task {self.task}) + "
                f"max_tokens {self.max_tokens} = {used} {limit}")
        if self.max_model_len and self.prompt_tokens + self.retry_tokens > self.max_model_len:
            text += (f"; a truncation retry ({self.retry_tokens} tokens) would not fit, the cut "
                     "reply is used instead")
        return text


@dataclasses.dataclass
class Report:
    """The rows, the throughput measurement, the context check and the verdict."""
    rows: list
    concurrency: int
    duration_s: float
    completed: int
    errors: list
    context: Context = dataclasses.field(default_factory=Context)
    # completion tokens of the throughput requests, per URL that answered them (every URL the
    # client holds is a key)
    tokens_by_url: dict = dataclasses.field(default_factory=dict)

    @property
    def requests_per_s(self) -> float:
        return self.completed / self.duration_s if self.duration_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Completion tokens per second, all servers together."""
        return sum(self.tokens_by_url.values()) / self.duration_s if self.duration_s else 0.0

    @property
    def problems(self) -> list[str]:
        out = [f"{r.template}: {p}" for r in self.rows for p in r.problems]
        out += [f"context: {p}" for p in self.context.problems]
        if not self.completed:
            out.append("throughput: no request completed")
        elif idle := [u for u, n in self.tokens_by_url.items() if not n]:
            out.append(f"throughput: no completion tokens from {', '.join(idle)}")
        out += [f"throughput: {e}" for e in self.errors[:3]]
        return out

    @property
    def go(self) -> bool:
        return not self.problems


def templates_of(cfg) -> list[str]:
    """The templates a run of ``cfg`` calls (its agent's and its method's)."""
    names = ["DRAFT_ACTION"] + (["REFLEXION_REFLECT"] if cfg.agent.kind == "reflexion" else [])
    extra = METHOD_TEMPLATES.get(cfg.method)
    if extra is None:
        raise ValueError(f"unknown method {cfg.method!r}; expected one of "
                         f"{', '.join(METHOD_TEMPLATES)}")
    if "CONDITION_JUDGE" in extra and not cfg.memory.get("use_conditions", True):
        extra = [t for t in extra if t != "CONDITION_JUDGE"]
    return names + extra


def request_of(cfg, name: str, reasoning_effort: str | None) -> tuple[list, SamplingParams]:
    """The messages and sampling of one template's request, at the configured budget."""
    if name == "CONDITION_JUDGE":
        judge = cfg.memory.judge
        prompt = conditions.LLMJudgeChecker.PROMPT.format(
            condition="the question asks for an inclusive bound", task=_SAMPLE["task"])
        effort = (judge.get("reasoning_effort") or None) if reasoning_effort else None
        return [{"role": "user", "content": prompt}], SamplingParams(
            temperature=judge.temperature, max_tokens=judge.max_tokens, seed=cfg.agent.seed,
            reasoning_effort=effort, constraint=conditions.JUDGE_CONSTRAINT)
    template = prompts.ALL[name]
    fields = {f: _SAMPLE.get(f, "(none)") for _, f, _, _ in string.Formatter().parse(
        template.user) if f}
    constraint = (template.reply.constraint(**_PARSE_ARGS.get(name, {}))
                  if template.reply is not None else None)
    # the budget the run would send: the template's own, except on a reasoning backbone
    return template.messages(**fields), template.budget(SamplingParams(
        temperature=cfg.agent.temperature, max_tokens=cfg.agent.max_tokens, seed=cfg.agent.seed,
        constraint=constraint), reasoning=bool(reasoning_effort))


async def _probe(backbone: Backbone, cfg, name: str) -> Row:
    messages, params = request_of(cfg, name, backbone.reasoning_effort)
    row = Row(name, params.constraint.name if params.constraint else "-", params.max_tokens)
    try:
        result = await backbone.chat(messages, params, Charge(purpose=name))
    except Exception as err:  # a failed request is a row that says why, not a traceback
        row.problems.append(f"request failed: {str(err)[:160]}")
        return row
    row.finish = result.finish_reason or "?"
    row.prompt_tokens, row.cached_tokens = result.usage.prompt_tokens, result.usage.cached_tokens
    row.completion_tokens = result.usage.completion_tokens
    if result.finish_reason == "length":
        row.problems.append(f"cut off at max_tokens={params.max_tokens} (finish_reason length)")
    mixed = any(m in result.text for m in _TRACE_MARKERS)
    row.reasoning = "mixed" if mixed else ("apart" if result.reasoning else "none")
    if mixed:
        row.problems.append("reasoning arrived inside the content (no reasoning parser?)")
    elif backbone.reasoning_effort and not result.reasoning:
        row.problems.append("a reasoning model returned no reasoning field")
    if params.constraint is not None:
        broken = constraints.violation(params.constraint, result.text)
        row.honoured = "no" if broken else "yes"
        if broken and result.finish_reason != "length":
            row.problems.append(f"constraint ignored ({broken})" if result.constrained else
                                f"constraint not sent, reply breaks it ({broken})")
    return row


async def _throughput(backbone: Backbone, cfg, concurrency: int, duration_s: float):
    """Requests completed in ``duration_s`` with ``concurrency`` in flight (the draft's, at
    most ``THROUGHPUT_MAX_TOKENS`` completion tokens each), the elapsed time, the errors and
    the completion tokens per URL that answered."""
    messages, params = request_of(cfg, "DRAFT_ACTION", backbone.reasoning_effort)
    params = dataclasses.replace(params, max_tokens=min(params.max_tokens, THROUGHPUT_MAX_TOKENS))
    deadline = time.monotonic() + duration_s
    done, errors, tokens = 0, [], collections.Counter()

    async def worker(i: int):
        nonlocal done
        n = 0
        while time.monotonic() < deadline:
            # distinct seeds: no response cache or batch deduplication answers a repeat
            seeded = dataclasses.replace(params, seed=(params.seed or 0) + 1 + i + n * concurrency)
            n += 1
            try:
                result = await backbone.chat(messages, seeded,
                                             Charge(purpose="PREFLIGHT_THROUGHPUT"))
                done += 1
                tokens[result.server or "?"] += result.usage.completion_tokens
            except Exception as err:
                errors.append(str(err)[:160])
                return
    start = time.monotonic()
    await asyncio.gather(*[worker(i) for i in range(concurrency)])
    return done, time.monotonic() - start, errors, tokens


def request_timeout_s(cfg, names: list[str]) -> float:
    """How long one preflight request may take: its largest token budget (over ``names``, the
    templates probed) at ``PREFLIGHT_TOKENS_PER_S``, scaled by the reasoning effort's share,
    after ``PREFLIGHT_QUEUE_S``; at least 60 s, at most the config's own ``timeout_s``. A
    medium-effort gpt-oss run (4,096 tokens) gets about 235 s, where a fixed 60 s cut off
    replies that a loaded server was still writing."""
    effort = cfg.backbone.get("reasoning_effort") or ""
    tokens = max(request_of(cfg, n, effort or None)[1].max_tokens for n in names)
    wanted = PREFLIGHT_QUEUE_S + EFFORT_SHARE.get(effort, 1.0) * tokens / PREFLIGHT_TOKENS_PER_S
    return min(float(cfg.backbone.get("timeout_s") or wanted), max(60.0, wanted))


def longest_prompt(cfg) -> tuple[int, str]:
    """The gpt-oss token count of the setting's longest first-draft prompt and its task: the
    draft of every task of ``cfg``'s benchmark, as the agent writes it (later attempts add at
    most the clipped trajectory, ``prompts.LIMITS``)."""
    from countermem_jax import domains
    from countermem_jax.method.prompting import prompts as templates
    tasks, _, domain = domains.load_benchmark(cfg.data)
    best = (0, "")
    for task in tasks:
        messages = templates.DRAFT_ACTION.messages(**templates.task_fields(task),
                                                   instructions=domain.instructions, history="")
        best = max(best, (tokens.count_messages(messages), str(task.task_id)))
    return best


async def served_max_model_len(backbone, model: str) -> int | None:
    """The smallest ``max_model_len`` the replicas' ``/v1/models`` give for ``model`` (vLLM
    lists it per model); None when no replica says."""
    inner = getattr(backbone, "inner", backbone)
    found = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10.0),
                                     trust_env=False) as session:
        for replica in getattr(inner, "replicas", []):
            try:
                async with session.get(f"{replica.url}/models", headers={
                        "Authorization": f"Bearer {inner.api_key}"}) as response:
                    cards = (await response.json(content_type=None)).get("data") or []
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError):
                continue
            lengths = [c.get("max_model_len") for c in cards if isinstance(c, dict)
                       and c.get("id") == model] or [c.get("max_model_len") for c in cards
                                                     if isinstance(c, dict)][:1]
            found += [n for n in lengths if isinstance(n, int) and not isinstance(n, bool)
                      and n > 0]
    return min(found) if found else None


async def context_of(backbone, cfg) -> Context:
    """The ``Context`` row: the setting's longest prompt and the servers' context."""
    params = request_of(cfg, "DRAFT_ACTION", backbone.reasoning_effort)[1]
    retry = int(cfg.backbone.get("max_tokens_on_truncation") or 0) or 2 * params.max_tokens
    out = Context(max_tokens=params.max_tokens, retry_tokens=retry,
                  max_model_len=await served_max_model_len(backbone, cfg.backbone.model))
    try:
        out.prompt_tokens, out.task = await asyncio.to_thread(longest_prompt, cfg)
    except Exception as err:   # the data are not here (not fetched): said, not fatal
        out.note = f"the benchmark's tasks could not be loaded: {str(err)[:160]}"
    return out


async def run_async(cfg, duration_s: float = 60.0, concurrency: int | None = None) -> Report:
    """Probes every template of ``cfg``'s method, then measures throughput for ``duration_s``."""
    names = templates_of(cfg)
    bcfg = cfg.backbone.copy_and_resolve_references()
    bcfg.cache_dir = ""   # the servers are being tested, not the response cache
    # bounded so that a dead or stuck server still ends the preflight: two attempts per probe,
    # each as long as the config's reasoning effort and token budget need (request_timeout_s)
    bcfg.timeout_s = request_timeout_s(cfg, names)
    bcfg.max_attempts = min(int(bcfg.get("max_attempts", 2)), 2)
    backbone = factory.make_backbone(bcfg)
    try:
        context = await context_of(backbone, cfg)
        rows = list(await asyncio.gather(*[_probe(backbone, cfg, n) for n in names]))
        # what the client holds: the configured cap, lowered to what the URL file's replicas hold
        concurrency = concurrency or backbone_limit(backbone)
        done, elapsed, errors, tokens = await _throughput(backbone, cfg, concurrency, duration_s)
        urls = served_urls(backbone)
    finally:
        await backbone.aclose()
    return Report(rows, concurrency, elapsed, done, errors, context,
                  {**dict.fromkeys(urls, 0), **tokens})


def served_urls(backbone) -> list[str]:
    """The base URLs ``backbone`` sends to (through a response cache, its inner one's)."""
    inner = getattr(backbone, "inner", backbone)
    return [r.url for r in getattr(inner, "replicas", [])]


def backbone_limit(backbone) -> int:
    """The requests in flight ``backbone`` allows (through a response cache, its inner one)."""
    inner = getattr(backbone, "inner", backbone)
    return int(getattr(inner, "max_concurrency", None) or getattr(backbone, "max_concurrency", 1))


def run(cfg, duration_s: float = 60.0, concurrency: int | None = None) -> Report:
    """``run_async`` from synchronous code."""
    return asyncio.run(run_async(cfg, duration_s, concurrency))


_COLUMNS = ("template", "constraint", "max_tokens", "finish", "reasoning", "honoured", "prompt",
            "cached", "completion", "check")


def render(report: Report) -> str:
    """One table (a row per template) and the verdict, as the binary prints them."""
    rows = [(r.template, r.constraint, str(r.max_tokens), r.finish, r.reasoning, r.honoured,
             str(r.prompt_tokens), str(r.cached_tokens), str(r.completion_tokens),
             "ok" if not r.problems else "FAIL") for r in report.rows]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(_COLUMNS)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [line(_COLUMNS), line(["-" * w for w in widths])] + [line(r) for r in rows]
    out.append(report.context.line())
    out.append(f"throughput: {report.requests_per_s:.1f} requests/s at concurrency "
               f"{report.concurrency} ({report.completed} in {report.duration_s:.1f} s)")
    per_url = "; ".join(f"{u}: {n / report.duration_s:,.0f}" if report.duration_s else f"{u}: 0"
                        for u, n in report.tokens_by_url.items())
    out.append(f"tokens/s: {report.tokens_per_s:,.0f} completion tokens/s in all ({per_url}); "
               f"the sweep's dry run takes --tokens_per_s={report.tokens_per_s:.0f}")
    if report.go:
        out.append("verdict: GO")
    else:
        out.append("verdict: NO-GO")
        out += [f"  - {p}" for p in report.problems]
    return "\n".join(out)
