"""Base agents: ReAct and Reflexion over the common task interface (paper §4.1)."""
import asyncio
import dataclasses
import hashlib
import logging
from typing import Any

from countermem_jax.runtime.inflight import CheckerPool
from countermem_jax.backbones.base import Backbone, Charge, SamplingParams
from countermem_jax.method.prompting import prompts
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.method.conditions import checkers as conditions
from evaluators.base import Evaluator, Outcome, State, Task

log = logging.getLogger(__name__)


@dataclasses.dataclass
class TaskContext:
    """Per-task execution record: budgets and the counters every metric is computed from."""
    task: Task
    phase: str
    run: str
    state: State
    call_budget: int
    token_budget: int
    max_decisions: int
    calls: int = 0            # world-model calls, counterfactual checks included
    failures: int = 0         # evaluated actions that failed the success criterion
    tokens: int = 0           # LLM tokens charged to this task
    llm_calls: int = 0        # LLM calls charged to this task (repair rounds included)
    cached_tokens: int = 0    # prompt tokens of those calls the server served from its cache
    decision: int = 0
    decision_tokens_start: int = 0
    expanded_failures: int = 0
    cf_checks: int = 0
    cf_tokens: int = 0        # Modules I–II LLM tokens (proposals, distillation), in tokens
    cf_reference_empty: bool = False  # a check met an empty reference result (verifies nothing)
    # failed actions Modules I-II expanded, and alternatives they checked, in this task: the same
    # action failing again, or the same alternative, is not checked twice
    cf_expanded: set = dataclasses.field(default_factory=set)
    cf_checked: set = dataclasses.field(default_factory=set)
    reflections: list = dataclasses.field(default_factory=list)
    solved: bool = False
    last_utility: float | None = None
    ledger: object = None     # where its calls are booked when not the backbone's (``Agent``)

    def charge(self, purpose: str = "") -> Charge:
        """Where an LLM call made for the current decision is booked in the ledger."""
        return Charge(self.phase, f"{self.run}/{self.task.task_id}#{self.decision}", purpose,
                      self.ledger)

    def book(self, tokens: int, calls: int = 1, cached_tokens: int = 0) -> None:
        """Counts LLM usage spent on this task's behalf: into task-run tokens and, since the
        decision's tokens are ``tokens - decision_tokens_start``, into the current decision's
        cost (Eq. 10). Every LLM call made for a task must be booked here once (paper §4.4:
        task-run tokens count reasoning, retrieval and augmentation)."""
        self.tokens += tokens
        self.llm_calls += calls
        self.cached_tokens += cached_tokens   # of those tokens, prompt tokens the server had cached


@dataclasses.dataclass
class DecisionInfo:
    """What an augmentation decided at one decision point (paper §3.4): the action to execute,
    the memory record it used (``None`` when the draft runs unchanged) and what it logs under
    ``memory`` in the run log's ``decision`` row."""
    action: str
    record_id: str | None = None
    log: dict = dataclasses.field(default_factory=dict)


class Augmentation:
    """No memory: the draft is executed as it is."""
    name = "none"

    async def decide(self, ctx: TaskContext, draft: str) -> DecisionInfo:
        """The action to execute instead of ``draft``; a memory method retrieves and selects a
        record here (Module III, §3.4). The base class keeps the draft."""
        return DecisionInfo(draft)

    async def observe(self, ctx: TaskContext, draft: str, info: DecisionInfo,
                      outcome: Outcome, previous_utility: float | None) -> dict:
        """Called after the decided action was checked; a memory method updates the used
        record's reuse statistics here (Appendix B.3). Returns what the decision row logs as
        ``reuse``."""
        return {}

    async def after_failure(self, ctx: TaskContext, state_before: State, action: str,
                            outcome: Outcome) -> None:
        """Called after a failed action; a memory method proposes and checks alternatives and
        stores a verified correction here (Modules I-II, §3.2-3.3)."""
        return None

    async def end_task(self, ctx: TaskContext) -> None:
        """Called once when the task ends (solved or out of budget); CounterMem closes the
        selector's last transition here (Appendix C.2)."""
        return None


class MemoryCalls:
    """The LLM calls a memory augmentation makes at a decision (paper §3.4), bound to one agent's
    backbone, domain and settings, so that the augmentation needs nothing else from the agent:
    revising the draft with a retrieved record, the condition judge's sampling settings, and a
    raw question charged to the decision (``Agent.chat``)."""

    def __init__(self, agent: "Agent"):
        self._agent = agent

    async def revise_with_record(self, ctx: TaskContext, draft: str,
                                 record_text: str) -> prompts.Parsed:
        """REVISE_WITH_RECORD with the domain's action instructions and parser."""
        return await self._agent.llm(ctx, prompts.REVISE_WITH_RECORD, {
            **prompts.task_fields(ctx.task), "draft": draft, "record": record_text,
            "instructions": self._agent.domain.instructions})

    @property
    def names(self):
        """The agent's domain's names hook (``Domain.names``), None without a domain: what the
        replay asks whether its result is well formed."""
        return getattr(self._agent.domain, "names", None)

    def judge_params(self, settings) -> SamplingParams:
        """A condition judge's sampling: its own temperature and length, the agent's seed, and
        its reasoning effort only on a backbone that takes one."""
        effort = settings.reasoning_effort if self._agent.backbone.reasoning_effort else None
        return SamplingParams(temperature=settings.temperature, max_tokens=settings.max_tokens,
                              seed=self._agent.cfg.seed, reasoning_effort=effort or None,
                              constraint=conditions.JUDGE_CONSTRAINT)

    async def chat(self, ctx: TaskContext, messages, params: SamplingParams, purpose: str):
        """``Agent.chat``: a raw call charged to ``ctx``'s decision and booked on its run."""
        return await self._agent.chat(ctx, messages, params, purpose)


@dataclasses.dataclass
class AgentConfig:
    """Settings of a base agent (paper §4.1), from the config's ``agent`` section (the values are
    stated there): the agent kind, its per-task budgets of attempts (evaluator calls) and tokens,
    and the backbone's sampling settings."""
    kind: str                        # "react" | "reflexion"
    max_attempts: int                # evaluator calls for the task's own attempts
    token_budget: int
    temperature: float
    max_tokens: int
    seed: int


def request_seed(seed: int, task_id: str, decision: int, template: str) -> int:
    """The seed of one sampled request (the gpt-oss configs sample, docs/backbones.md): derived
    from the config's seed, the task, the decision and the template, never the run, so the
    paired runs of a task (base and memory) ask the same first draft and a rerun asks the same
    requests (the response cache serves them); a 31-bit integer, as servers take."""
    text = f"{seed}/{task_id}#{decision}/{template}".encode("utf-8")
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big") & 0x7FFFFFFF


class Agent:
    """A ReAct or Reflexion agent (paper §4.1) on one backbone, evaluator and domain.
    ``failures`` is the run's log of reply-contract violations (Appendix D.8); every template
    call made through ``llm`` (the agent's own, its augmentation's, a baseline's) is logged there.
    """

    def __init__(self, backbone: Backbone, evaluator: Evaluator, domain, cfg: AgentConfig,
                 runlog=None, failures: ParseFailureLog | None = None, *,
                 checks: CheckerPool | None = None, ledger=None):
        """``failures``: the run's parse-failure log; ``checks``: the phase's bounded pool for
        checker calls, shared by all its agents (without one, checks go to asyncio's default
        executor, as ``asyncio.to_thread``); ``ledger``: where its tasks' calls are booked
        (default: the backbone's)."""
        if cfg.kind not in ("react", "reflexion"):
            raise ValueError(f"unknown agent {cfg.kind!r}; expected 'react' or 'reflexion'")
        self.backbone, self.evaluator, self.domain, self.cfg = backbone, evaluator, domain, cfg
        self.runlog = runlog
        self.failures = failures if failures is not None else ParseFailureLog()
        self.checks, self.ledger = checks, ledger
        self.params = SamplingParams(temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                                     seed=cfg.seed)

    async def check(self, state: State, action: str) -> Outcome:
        """The checker's verdict on ``action`` from ``state``, on the phase's checker pool."""
        if self.checks is None:
            return await asyncio.to_thread(self.evaluator.evaluate, state, action)
        return await self.checks.run(self.evaluator.evaluate, state, action)

    async def llm(self, ctx: TaskContext, template, fields, parse_args=None,
                  params: SamplingParams | None = None) -> prompts.Parsed:
        """A template call on behalf of ``ctx``: charged to its decision, booked on the task run,
        failures logged in ``self.failures``. A template that asks for an action has it parsed
        by this agent's domain, the one the action is checked in."""
        if template.parses_action:
            parse_args = {**(parse_args or {}), "domain": self.domain}
        if params is None and self.params.temperature > 0:
            params = dataclasses.replace(self.params, seed=request_seed(
                self.cfg.seed, ctx.task.task_id, ctx.decision, template.name))
        parsed = await prompts.call_template(self.backbone, template, fields, charge=ctx.charge(),
                                             params=params or self.params, parse_args=parse_args,
                                             failures=self.failures)
        ctx.book(parsed.tokens, parsed.attempts, parsed.cached_tokens)
        return parsed

    async def chat(self, ctx: TaskContext, messages, params: SamplingParams, purpose: str):
        """A raw LLM call on behalf of ``ctx``'s current decision (e.g. a condition judge's
        question): charged to the ledger under that decision and booked on the task run; a
        truncated reply is asked again once and a broken constraint counted
        (``prompts.checked_chat``)."""
        result, usage, calls = await prompts.checked_chat(
            self.backbone, messages, params, ctx.charge(purpose), self.failures)
        ctx.book(usage.total, calls, usage.cached_tokens)
        return result

    def _history(self, ctx: TaskContext) -> str:
        lines = []
        for i, attempt in enumerate(ctx.state.attempts, 1):
            lines.append(f"Attempt {i}:\n```\n{prompts.clip(attempt.action, 'action')}\n```\n"
                         f"Checker feedback: {prompts.clip(attempt.outcome.feedback, 'feedback')}")
        if self.cfg.kind == "reflexion" and ctx.reflections:
            lines.append("Your reflections on earlier attempts:\n" +
                         "\n".join(f"- {r}" for r in ctx.reflections))
        if lines:
            lines.append("Write a corrected action.")
        return ("\n\n".join(lines) + "\n\n") if lines else ""

    async def draft(self, ctx: TaskContext) -> str:
        """The agent's own next action for ``ctx``: the task, earlier attempts with their checker
        feedback and, for Reflexion, its reflections. An unparsable reply is used raw, so the
        checker (not the parser) decides whether it fails."""
        parsed = await self.llm(ctx, prompts.DRAFT_ACTION, {
            **prompts.task_fields(ctx.task), "instructions": self.domain.instructions, "history": self._history(ctx)})
        return parsed.value if parsed.ok else (parsed.raw.strip() or "")

    async def run(self, task: Task, augmentation: Augmentation, *, phase: str, run: str,
                  extra: dict | None = None) -> TaskContext:
        """Runs ``task`` to the end (solved, attempts or tokens spent) with ``augmentation`` at
        each decision point, and logs one ``decision`` row per attempt and a ``task_end`` row
        (the counters of §4.4); ``extra`` fields go into every row."""
        ctx = TaskContext(task, phase, run, self.evaluator.reset(task),
                          call_budget=self.cfg.max_attempts, token_budget=self.cfg.token_budget,
                          max_decisions=self.cfg.max_attempts, ledger=self.ledger)
        for k in range(self.cfg.max_attempts):
            if ctx.tokens >= ctx.token_budget:
                break
            ctx.decision = k
            ctx.decision_tokens_start = ctx.tokens
            draft = await self.draft(ctx)
            info = await augmentation.decide(ctx, draft)
            state_before, previous = ctx.state, ctx.last_utility
            outcome = await self.check(state_before, info.action)
            ctx.calls += outcome.world_model_calls
            ctx.failures += outcome.failed_attempt
            ctx.state = state_before.after(info.action, outcome)
            ctx.solved = outcome.success
            ctx.last_utility = outcome.utility
            if (self.cfg.kind == "reflexion" and not outcome.success
                    and k + 1 < self.cfg.max_attempts):
                # Written after this decision's failure and charged to it (ledger, task-run
                # tokens and the decision's token cost in the selector's reward).
                parsed = await self.llm(ctx, prompts.REFLEXION_REFLECT, {
                    **prompts.task_fields(task), "action": info.action,
                    "feedback": outcome.feedback})
                if parsed.ok:
                    ctx.reflections.append(parsed.value)
            reuse = await augmentation.observe(ctx, draft, info, outcome, previous)
            if self.runlog:
                self.runlog.write("decision", run=run, phase=phase, task_id=task.task_id,
                                  decision=k, draft=draft, action=info.action,
                                  changed=draft.strip() != info.action.strip(),
                                  outcome=_outcome_json(outcome), memory=info.log, reuse=reuse,
                                  tokens_so_far=ctx.tokens, **(extra or {}))
            if outcome.success:
                break
            await augmentation.after_failure(ctx, state_before, info.action, outcome)
        await augmentation.end_task(ctx)
        if self.runlog:
            self.runlog.write("task_end", run=run, phase=phase, task_id=task.task_id,
                              solved=ctx.solved, calls=ctx.calls, failures=ctx.failures,
                              tokens=ctx.tokens, cached_tokens=ctx.cached_tokens,
                              llm_calls=ctx.llm_calls,
                              cf_checks=ctx.cf_checks, cf_tokens=ctx.cf_tokens,
                              cf_reference_empty=ctx.cf_reference_empty,
                              decisions=ctx.decision + 1,
                              benchmark=task.benchmark, domain=task.domain, **(extra or {}))
        return ctx


def _outcome_json(o: Outcome) -> dict[str, Any]:
    out = {"utility": o.utility, "success": o.success, "completed": o.completed,
           "feedback": o.feedback, "reason": o.reason, "wall_time": round(o.wall_time, 4)}
    if (o.details or {}).get("reference_empty"):   # any empty result matches: a weak verdict
        out["reference_empty"] = True
    return out
