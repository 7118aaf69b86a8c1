"""Module III: draft → retrieve → select one record or skip → revise → check (paper §3.4, App. C).
``CounterMemAugmentation`` is the memory plug-in at the agents' decision point; each closed
decision becomes a ``Transition`` with Eq. 10's reward, handed to the selector.
"""
import dataclasses
from typing import Callable, Protocol

import numpy as np

from countermem_jax.method.agents import Augmentation, DecisionInfo, MemoryCalls
from countermem_jax.method.edit_replay import replay, too_long
from countermem_jax.method.prompting import prompts
from countermem_jax.method.memory import reuse as reuse_lib
from countermem_jax.method.memory.record import normalize_action
from countermem_jax.method import text_embedding as embedding
from countermem_jax.method.retrieval import batching
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.method.selector import dqn, features, policies
from countermem_jax.method.selector.transition import Transition
from evaluators.grouping import group_id

SKIP_ONLY = features.skip_only_mask()   # the mask after a task's last decision
REVISIONS = ("llm", "replay", "replay_then_llm")


def condition_query(task, run: str, draft: str | None = None,
                    feedback: str | None = None, last_action: str | None = None) -> TaskFacts:
    """What the condition checkers see of ``task`` at a decision of the task run ``run``: its
    draft, and the checker's feedback on the last attempt ("" before the first); and what
    retrieval excludes by: the task's reference group. The replay's place test reads the
    feedback only as the draft's own (``draft_feedback``): where the draft repeats the last
    attempt's action (``last_action``); a new draft has not been checked, and the feedback on
    another action names that action's mistakes."""
    own = (draft is not None and last_action is not None
           and normalize_action(draft) == normalize_action(last_action))
    return TaskFacts(task.task_id, task.prompt,
                     {"environment": task.environment, **task.features}, scope=run, draft=draft,
                     feedback=feedback, group=group_id(task),
                     draft_feedback=(feedback or "") if own else "")


def judge_messages(prompt: str) -> list[dict]:
    """The condition judge's chat for one of its prompts."""
    return [{"role": "user", "content": prompt}]


def judged_conditions(index: RetrievalIndex, task_id: str, group: str = "") -> tuple[str, ...]:
    """The distinct conditions a decision of task ``task_id`` has the judge decide: those of the
    records it could retrieve (never those of its reference group, its own among them), none
    when the index ignores conditions. Construction in flight records this as a run's read and
    replays it."""
    if not index.use_conditions:
        return ()
    return tuple(dict.fromkeys(r.condition.strip()
                               for r in index.visible_records(task_id, group)
                               if r.condition.strip()))


def _no_place_counts(index: RetrievalIndex, result, counts: dict) -> dict:
    """The decision's condition counts with the revision's place test folded in: a distinct
    condition that held, but whose every record (other than the task's own) has no place for
    its edit in the draft, moves from "compatible" to "no_place" (``record_fits``); nothing
    changes for an index without a place test (``RetrievalIndex.fits``)."""
    if getattr(index, "fits", None) is None:
        return {}
    skipped = set(result.excluded_no_place) if result else set()
    if not skipped:
        return {"no_place": 0}
    held: dict[str, bool] = {}   # condition -> some record with it fits
    out_of_play = set(result.excluded_same_task) | set(result.excluded_condition) | set(
        result.excluded_transfer)
    for r in index.records:
        c = r.condition.strip()
        if c and r.record_id not in out_of_play:
            held[c] = held.get(c, False) or r.record_id not in skipped
    moved = sum(1 for fits in held.values() if not fits)
    return {"compatible": counts.get("compatible", 0) - moved, "no_place": moved}


def state_text(ctx) -> str:
    """What retrieval matches records against: the task prompt plus the state so far."""
    text = ctx.task.prompt
    if ctx.state.attempts:
        last = ctx.state.attempts[-1]
        text += f"\nLast attempt: {last.action}\nFeedback: {last.outcome.feedback}"
    return text


@dataclasses.dataclass
class _Pending:
    obs: np.ndarray
    mask: np.ndarray
    action: int
    reward: float


class ConstructionHooks(Protocol):
    """What construction adds to a decision (paper §3.2–3.3, Alg. 1 phase 1)."""

    def observe_reuse(self, record_id: str, label: str) -> None:
        """Updates a used record's reuse statistic with the use's label."""

    async def after_failure(self, ctx, state_before, action: str, outcome) -> None:
        """Modules I–II on a failed attempt (counterfactual checks, distillation, admission)."""


class CounterMemAugmentation(Augmentation):
    """Module III at the agents' decision point; what differs between phases is passed in.

    index_source  returns the ``RetrievalIndex`` to use now (construction: one that follows the
                  growing store; otherwise ``lambda: index``);
    selector      the online learner, an episode's ε-greedy explorer, the frozen greedy DQN or a
                  fixed rule; it ``observe``s every closed transition;
    hooks         ``ConstructionHooks`` during construction (reuse statistics, Modules I–II after
                  a failure), else ``None``;
    calls         the LLM calls a decision makes (revision, the condition judge);
    revision      ``REVISIONS``: "llm" (REVISE_WITH_RECORD), "replay" (the record's checked edit
                  made where it fits, ``edit_replay``; no LLM call), "replay_then_llm";
    dqn_cfg       Eq. 10's reward weights (without it only the success bonus);
    transitions   where closed transitions are appended (the log, offline retraining).
    Free-text conditions are judged before retrieval, asynchronously, and charged to the decision.
    """
    name = "countermem"

    def __init__(self, calls: MemoryCalls, *, index_source: Callable[[], RetrievalIndex],
                 selector: policies.Selector, hooks: ConstructionHooks | None = None,
                 render_condition: bool = True, dqn_cfg: dqn.DQNConfig | None = None,
                 transitions: list | None = None, revision: str = "llm"):
        if revision not in REVISIONS:
            raise ValueError(f"revision {revision!r}: expected one of {REVISIONS}")
        self.calls, self.index_source = calls, index_source
        self.selector, self.hooks = selector, hooks
        self.render_condition, self.dqn_cfg = render_condition, dqn_cfg
        self.revision = revision
        self.transitions: list[Transition] = transitions if transitions is not None else []
        self._pending: dict[str, _Pending] = {}
        self._decision_cost: dict[str, tuple[int, int]] = {}  # calls, failures at decide
        self.episode_returns: dict[str, float] = {}

    async def decide(self, ctx, draft: str) -> DecisionInfo:
        """One decision of §3.4: judge the candidates' conditions, retrieve for the state, build
        the observation, close the previous decision's transition, let the selector choose a
        record or skip, and revise the draft with the chosen record."""
        index = self.index_source()
        last = ctx.state.last
        query = condition_query(ctx.task, ctx.run, draft, last.outcome.feedback if last else "",
                                last.action if last else None)
        condition_log = await self._judge_conditions(ctx, index, query)
        s_text = state_text(ctx)
        s_emb, d_emb = embedding.embed_texts([s_text, draft])
        result = (await batching.retrieve(index, query, s_emb)) if index.records else None
        candidates = result.candidates if result else ()
        budget = features.BudgetState(ctx.calls, ctx.call_budget, ctx.tokens, ctx.token_budget,
                                      ctx.decision, ctx.max_decisions, ctx.failures,
                                      ctx.last_utility)
        obs, mask = features.build_observation(s_emb, d_emb, candidates, budget)
        self._close_pending(ctx, obs, mask, done=False)
        choice = await batching.select(self.selector, obs, mask)
        action, q_values = choice.action, choice.q_values
        log = {"retrieved": [{"record_id": c.record.record_id, "score": round(c.score, 4),
                              "relevance": round(c.relevance, 4)} for c in candidates],
               "excluded_same_task": list(result.excluded_same_task) if result else [],
               "excluded_condition": list(result.excluded_condition) if result else [],
               "excluded_no_place": list(result.excluded_no_place) if result else [],
               "excluded_transfer": list(result.excluded_transfer) if result else [],
               "excluded_stale": list(result.excluded_stale) if result else [],
               "covered": bool(candidates), "selector_action": int(action),
               "selector": self.selector.name,
               "q_values": None if q_values is None else np.round(np.asarray(q_values), 4)}
        if condition_log:
            log["conditions"] = condition_log | _no_place_counts(index, result, condition_log)
        info = DecisionInfo(draft, None, log)
        if action != features.SKIP:
            record = candidates[action - 1].record
            info.action = await self._revise(ctx, draft, record, query.draft_feedback, log)
            info.record_id = record.record_id
            log["record_id"] = record.record_id
        self._pending[ctx.task.task_id] = _Pending(obs, mask, int(action), 0.0)
        self._decision_cost[ctx.task.task_id] = (ctx.calls, ctx.failures)
        return info

    async def _revise(self, ctx, draft: str, record, feedback: str, log: dict) -> str:
        """The draft revised with the chosen ``record``: under ``revision="replay"`` and
        ``"replay_then_llm"`` its whole edit made where it fits (``feedback``: the checker's on
        the draft itself, ``condition_query``; the agent's domain's names hook checks the result);
        where it has no place the draft itself (replay, ``log["revision"]`` "no_place", or
        "too_long" past the replay's length bound) or REVISE_WITH_RECORD (replay_then_llm,
        "llm"), as under ``revision="llm"`` (an unparsable reply keeps the draft).
        ``log["revision"]`` says which made the action."""
        if self.revision in ("replay", "replay_then_llm"):
            replayed = replay(record, draft, feedback or "", getattr(self.calls, "names", None))
            if replayed is not None:
                log["revision"] = "replay"
                return replayed
            if self.revision == "replay":
                log["revision"] = ("too_long" if too_long(
                    record.original_action, record.improved_action, draft) else "no_place")
                return draft
        log["revision"] = "llm"
        parsed = await self.calls.revise_with_record(
            ctx, draft, prompts.render_record(record, self.render_condition))
        return parsed.value if parsed.ok else draft

    async def _judge_conditions(self, ctx, index: RetrievalIndex, query: TaskFacts) -> dict:
        """Judges (once per task run) the conditions of the records this decision could
        retrieve; returns the verdict counts with the judge's calls and tokens, {} if none."""
        conditions = judged_conditions(index, ctx.task.task_id, query.group)
        if not conditions:
            return {}
        checker, calls, tokens0 = index.checker, 0, ctx.tokens
        judge = checker.judge
        params = None if judge is None else self.calls.judge_params(judge.settings)

        async def ask(prompt: str):
            # Agent.chat charges the decision in the ledger and books tokens and the call on
            # the task run (task-run tokens, llm_calls, the decision's reward cost).
            nonlocal calls
            result = await self.calls.chat(ctx, judge_messages(prompt), params,
                                           "CONDITION_JUDGE")
            calls += 1
            return result
        counts = await checker.judge_pending(conditions, query, ask)
        return counts.to_json() | {"judge_calls": calls, "judge_tokens": ctx.tokens - tokens0}

    async def observe(self, ctx, draft, info, outcome, previous_utility) -> dict:
        """After the decision's check: the used record's reuse label (handed to the hooks) and
        the decision's reward so far (Eq. 10, its calls, failures and tokens)."""
        out = {}
        if info.record_id is not None:
            label = reuse_lib.reuse_label(draft, info.action, outcome.success, outcome.utility,
                                          previous_utility)
            out = {"record_id": info.record_id, "label": label}
            if self.hooks is not None:
                self.hooks.observe_reuse(info.record_id, label)
        pending = self._pending.get(ctx.task.task_id)
        if pending is not None and self.dqn_cfg is not None:
            calls0, fails0 = self._decision_cost[ctx.task.task_id]
            # the decision's tokens: its draft (charged before decide) and any revision
            pending.reward = dqn.reward(self.dqn_cfg, final=False, solved=False,
                                        calls=ctx.calls - calls0, failures=ctx.failures - fails0,
                                        tokens=ctx.tokens - ctx.decision_tokens_start)
        return out

    async def after_failure(self, ctx, state_before, action, outcome) -> None:
        """Construction's Modules I–II on a failed attempt (nothing outside construction)."""
        if self.hooks is not None:
            await self.hooks.after_failure(ctx, state_before, action, outcome)

    def _close_pending(self, ctx, next_obs, next_mask, done: bool) -> None:
        pending = self._pending.pop(ctx.task.task_id, None)
        if pending is None:
            return
        reward = pending.reward + (1.0 if done and ctx.solved else 0.0)
        self.episode_returns[ctx.task.task_id] = self.episode_returns.get(ctx.task.task_id, 0.0) \
            + reward
        transition = Transition(obs=pending.obs, action=pending.action, reward=reward,
                                next_obs=next_obs, next_mask=next_mask, done=float(done),
                                mask=pending.mask, task_id=ctx.task.task_id)
        self.transitions.append(transition)
        self.selector.observe(transition)

    async def end_task(self, ctx) -> None:
        """Closes the last decision's transition: terminal, with the success bonus of Eq. 10."""
        self._close_pending(ctx, np.zeros(features.OBS_DIM, np.float32), SKIP_ONLY, done=True)
