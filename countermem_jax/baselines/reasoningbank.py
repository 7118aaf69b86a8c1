"""ReasoningBank baseline and its two controls (Ouyang et al., "ReasoningBank"; paper App. E.3).

Item format (kept by all three variants): ``title``, ``description``, ``content`` — a strategy,
without CounterMem's condition field — plus the source task's query and the verdict it came from.

  reasoningbank           After each construction task the backbone judges its own trajectory
                          without ground truth (``REASONINGBANK_JUDGE``, LLM-as-a-judge as in the
                          original; a broken contract counts as failure, logged) and distils one
                          item from it, success or failure (``REASONINGBANK_EXTRACT``).
  reasoningbank_matts     MaTTS, parallel scaling: k (3) independent rollouts of each construction
                          task, each self-judged, contrasted together into one item
                          (``MATTS_SELF_CONTRAST``). Rollouts differ by sampling seed at
                          ``matts_temperature``; they run one after another with the same memory
                          (none reads another's result), so the order never changes a result.
  reasoningbank_verified  The extractor receives the checked outcome of every step and the
                          checker's verdict (``REASONINGBANK_VERIFIED``); no self-judgement.

The trajectory every extractor sees holds the actions and the feedback the agent saw; only the
verified variant adds the checked outcomes (utility, success, completed) and the checker's verdict.
Use: the top-1 item whose source query is most similar to the task's state (shared embedding φ;
ReasoningBank retrieves by query embedding), shown to ``REVISE_WITH_MEMORY``. Adaptation: one item
per extraction (the template's contract) where the original allows up to three.
"""
import dataclasses

from countermem_jax.agents import Agent
from countermem_jax.prompting import prompts
from countermem_jax.baselines import common


class ReasoningBankAugmentation(common.SimilarityAugmentation):
    kind = "reasoning strategies from earlier tasks"
    match_field = "query"

    def render(self, item) -> str:
        return (f"Title: {item['title']}\nDescription: {item['description']}\n"
                f"Content: {item['content']}")


class ReasoningBankBuilder(common.Builder):
    augmentation_cls = ReasoningBankAugmentation

    async def _judge(self, ctx) -> str:
        parsed = await self.agent.llm(ctx, prompts.REASONINGBANK_JUDGE, {
            "trajectory": common.trajectory_text(ctx.task, ctx.state.attempts)})
        return parsed.value

    def _store(self, parsed, ctx, verdict) -> dict:
        if not parsed.ok:
            return {"item": None, "verdict": verdict, "reason": f"{parsed.error}"}
        item = self.memory.add("strategy", [ctx.task.task_id], query=ctx.task.prompt,
                               verdict=verdict, **parsed.value)
        return {"item": item["item_id"], "verdict": verdict}

    async def learn(self, ctx) -> dict:
        verdict = await self._judge(ctx)
        parsed = await self.agent.llm(ctx, prompts.REASONINGBANK_EXTRACT, {
            "verdict": verdict, "trajectory": common.trajectory_text(ctx.task, ctx.state.attempts)})
        return self._store(parsed, ctx, verdict)


class VerifiedReasoningBankBuilder(ReasoningBankBuilder):
    async def learn(self, ctx) -> dict:
        verdict = "success" if common.verified_success(ctx.state.last) else "failure"
        parsed = await self.agent.llm(ctx, prompts.REASONINGBANK_VERIFIED, {
            "trajectory": common.trajectory_text(ctx.task, ctx.state.attempts, checked=True,
                                                 verdict=f"{verdict} (checked)")})
        return self._store(parsed, ctx, verdict)


class MattsBuilder(ReasoningBankBuilder):
    def __init__(self, agent, memory, settings):
        super().__init__(agent, memory, settings)
        self.k = int(settings["matts_k"])
        self._rollouts: dict[str, list] = {}

    def rollout_agent(self, i: int) -> Agent:
        cfg = dataclasses.replace(self.agent.cfg, seed=self.agent.cfg.seed + i,
                                  temperature=max(self.agent.cfg.temperature,
                                                  float(self.settings["matts_temperature"])))
        return Agent(self.agent.backbone, self.agent.evaluator, self.agent.domain, cfg,
                     self.agent.runlog, self.agent.failures)

    async def run_task(self, task, run: str) -> list:
        self._rollouts[task.task_id] = []
        return [await self.rollout_agent(i).run(task, self.construction_augmentation(),
                                                phase="construction", run=f"{run}/rollout{i}")
                for i in range(self.k)]

    async def learn(self, ctx) -> dict:
        rollouts = self._rollouts.setdefault(ctx.task.task_id, [])
        rollouts.append((ctx.state.attempts, await self._judge(ctx)))
        if len(rollouts) < self.k:
            return {"rollout": len(rollouts), "verdict": rollouts[-1][1]}
        text = "\n\n---\n\n".join(f"Rollout {n} (self-judged {verdict}):\n"
                                  + common.trajectory_text(ctx.task, attempts)
                                  for n, (attempts, verdict) in enumerate(rollouts, 1))
        parsed = await self.agent.llm(ctx, prompts.MATTS_SELF_CONTRAST, {"trajectory": text})
        del self._rollouts[ctx.task.task_id]
        verdicts = [v for _, v in rollouts]
        return {"rollouts": len(verdicts), **self._store(parsed, ctx, ",".join(verdicts))}
