"""Module III: draft → retrieve → select one record or skip → revise → check (paper §3.4, App. C).

``CounterMemAugmentation`` is the memory plug-in for the agents' decision point. Per phase:
  construction       retrieval over the growing store, a fixed construction policy (default: use
                     the top record), reuse statistics updated after each use, and Modules I–II
                     after failures;
  selector_training  frozen store, ε-greedy DQN (``OnlineLearner``), transitions with Eq. 10's
                     reward fed to the learner and kept for offline retraining;
  evaluation         frozen store and frozen selector, greedy, nothing updated.
Retrieval always excludes the current task's own records. Free-text conditions of the records a
decision could retrieve are judged by the backbone before retrieval (``_judge_conditions``), with
the judge's own sampling settings, asynchronously, and charged to that decision: its ledger entry,
the task-run tokens, and the decision log's ``memory.conditions`` (verdict counts, judge calls and
tokens).
"""
import dataclasses

import numpy as np

from countermem_jax.agents import Augmentation, DecisionInfo
from countermem_jax.prompting import prompts
from countermem_jax.backbones.base import SamplingParams
from countermem_jax.memory import reuse as reuse_lib
from countermem_jax import text_embedding as embedding
from countermem_jax.retrieval.conditions import TaskContext as CondTask
from countermem_jax.retrieval.retrieve import RetrievalIndex
from countermem_jax.selector import dqn, features

SKIP_ONLY = np.array([True, False, False, False, False])


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


class CounterMemAugmentation(Augmentation):
    name = "countermem"

    def __init__(self, agent, *, phase: str, store=None, index: RetrievalIndex | None = None,
                 selector=None, learner=None, builder=None, render_condition: bool = True,
                 dqn_cfg: dqn.DQNConfig = dqn.DQNConfig(), index_factory=None,
                 transitions: list | None = None):
        self.agent, self.phase = agent, phase
        self.store, self.index, self.selector, self.learner = store, index, selector, learner
        self.builder, self.render_condition, self.dqn_cfg = builder, render_condition, dqn_cfg
        self.index_factory = index_factory
        self.transitions = transitions if transitions is not None else []
        self._pending: dict[str, _Pending] = {}
        self._decision_cost: dict[str, tuple[int, int]] = {}  # calls, failures at decide
        self.episode_returns: dict[str, float] = {}

    def _current_index(self) -> RetrievalIndex:
        if self.index_factory is not None:  # construction: the store changes between decisions
            return self.index_factory()
        return self.index

    async def decide(self, ctx, draft: str) -> DecisionInfo:
        index = self._current_index()
        query = CondTask(ctx.task.task_id, ctx.task.prompt,
                         {"environment": ctx.task.environment, **ctx.task.features},
                         scope=ctx.run)
        condition_log = await self._judge_conditions(ctx, index, query)
        s_text = state_text(ctx)
        s_emb, d_emb = embedding.embed_texts([s_text, draft])
        result = index.retrieve_embedded([query], s_emb[None])[0] if index.records else None
        candidates = result.candidates if result else ()
        budget = features.BudgetState(ctx.calls, ctx.call_budget, ctx.tokens, ctx.token_budget,
                                      ctx.decision, ctx.max_decisions, ctx.failures,
                                      ctx.last_utility)
        obs, mask = features.build_observation(s_emb, d_emb, candidates, budget)
        self._close_pending(ctx, obs, mask, done=False)
        q_values = None
        if self.learner is not None:
            action, q = self.learner.act(obs, mask)
            q_values = q
        else:
            choice = self.selector.select(obs, mask)
            action, q_values = choice.action, choice.q_values
        log = {"retrieved": [{"record_id": c.record.record_id, "score": round(c.score, 4),
                              "relevance": round(c.relevance, 4)} for c in candidates],
               "excluded_same_task": list(result.excluded_same_task) if result else [],
               "excluded_condition": list(result.excluded_condition) if result else [],
               "covered": bool(candidates), "selector_action": int(action),
               "selector": getattr(self.selector, "name", "dqn-training"),
               "q_values": None if q_values is None else np.round(np.asarray(q_values), 4)}
        if condition_log:
            log["conditions"] = condition_log
        info = DecisionInfo(draft, None, log)
        if action > 0:
            record = candidates[action - 1].record
            parsed = await self.agent.llm(ctx, prompts.REVISE_WITH_RECORD, {
                "task": ctx.task.visible_text(), "draft": draft,
                "record": prompts.render_record(record, self.render_condition),
                "instructions": self.agent.domain.instructions},
                parse_args={"domain": self.agent.domain.name})
            info.action = parsed.value if parsed.ok else draft
            info.record_id = record.record_id
            log["record_id"] = record.record_id
        self._pending[ctx.task.task_id] = _Pending(obs, mask, int(action), 0.0)
        self._decision_cost[ctx.task.task_id] = (ctx.calls, ctx.failures)
        return info

    async def _judge_conditions(self, ctx, index: RetrievalIndex, query: CondTask) -> dict:
        """Judges (once per task run) the conditions of the records this decision could
        retrieve; returns the verdict counts with the judge's calls and tokens, {} if none."""
        conditions = [r.condition for r in index.records  # own-task records are never offered
                      if r.condition.strip() and r.source_task_id != ctx.task.task_id]
        if not index.use_conditions or not conditions:
            return {}
        checker, calls, tokens0 = index.checker, 0, ctx.tokens
        judge = checker.judge
        if judge is not None:
            s = judge.settings
            effort = s.reasoning_effort if self.agent.backbone.reasoning_effort else None
            params = SamplingParams(temperature=s.temperature, max_tokens=s.max_tokens,
                                    seed=self.agent.cfg.seed, reasoning_effort=effort or None)

        async def ask(prompt: str):
            # Agent.chat charges the decision in the ledger and books tokens and the call on
            # the task run (task-run tokens, llm_calls, the decision's reward cost).
            nonlocal calls
            result = await self.agent.chat(ctx, [{"role": "user", "content": prompt}], params,
                                           "CONDITION_JUDGE")
            calls += 1
            return result
        counts = await checker.judge_pending(conditions, query, ask)
        return counts.to_json() | {"judge_calls": calls, "judge_tokens": ctx.tokens - tokens0}

    async def observe(self, ctx, draft, info, outcome, previous_utility) -> dict:
        out = {}
        if info.record_id is not None:
            label = reuse_lib.reuse_label(draft, info.action, outcome.success, outcome.utility,
                                          previous_utility)
            out = {"record_id": info.record_id, "label": label}
            if self.phase == "construction" and self.store is not None:
                self.store.observe_reuse(info.record_id, label)
        pending = self._pending.get(ctx.task.task_id)
        if pending is not None:
            calls0, fails0 = self._decision_cost[ctx.task.task_id]
            # the decision's tokens: its draft (charged before decide) and any revision
            pending.reward = dqn.reward(self.dqn_cfg, final=False, solved=False,
                                        calls=ctx.calls - calls0, failures=ctx.failures - fails0,
                                        tokens=ctx.tokens - ctx.decision_tokens_start)
        return out

    async def after_failure(self, ctx, state_before, action, outcome) -> None:
        if self.phase == "construction" and self.builder is not None:
            await self.builder.expand(ctx, state_before, action, outcome)

    def _close_pending(self, ctx, next_obs, next_mask, done: bool) -> None:
        pending = self._pending.pop(ctx.task.task_id, None)
        if pending is None:
            return
        reward = pending.reward + (1.0 if done and ctx.solved else 0.0)
        self.episode_returns[ctx.task.task_id] = self.episode_returns.get(ctx.task.task_id, 0.0) \
            + reward
        transition = (pending.obs, pending.action, reward, next_obs, next_mask, float(done),
                      pending.mask, ctx.task.task_id)
        self.transitions.append(transition)
        if self.learner is not None:
            self.learner.observe(pending.obs, pending.action, reward, next_obs, next_mask, done)

    async def end_task(self, ctx) -> None:
        self._close_pending(ctx, np.zeros(features.OBS_DIM, np.float32), SKIP_ONLY, done=True)
