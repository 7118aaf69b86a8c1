"""ReasoningBank baseline and its two controls (Ouyang et al., "ReasoningBank";
paper §4.1, Appendix D.5, and E.2 for the two controls).
"""
import dataclasses

from countermem_jax.method.agents import Agent
from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.baselines import common


class ReasoningBankAugmentation(common.SimilarityAugmentation):
    """ReasoningBank at use time: the strategy whose source query best matches the task."""
    kind = "reasoning strategies from earlier tasks"
    match_field = "query"

    def render(self, item) -> str:
        """A strategy as shown to the backbone: title, description, content."""
        return (f"Title: {item['title']}\nDescription: {item['description']}\n"
                f"Content: {item['content']}")


class ReasoningBankBuilder(common.Builder):
    """Plain ReasoningBank: self-judge each construction run, then distil one strategy from it.

    Failures are distilled too (as preventive lessons), which is what separates ReasoningBank
    from success-only memories.
    """
    augmentation_cls = ReasoningBankAugmentation

    async def _judge(self, ctx) -> str:
        """The backbone's own success/failure verdict on the run, without ground truth."""
        parsed = await self.agent.llm(ctx, baseline_prompts.REASONINGBANK_JUDGE, {
            "trajectory": common.trajectory_text(ctx.task, ctx.state.attempts)})
        return parsed.value

    def _store(self, parsed, ctx, verdict) -> dict:
        """Adds the parsed strategy with its source query and verdict; logs why when nothing
        parsed.
        """
        if not parsed.ok:
            return {"item": None, "verdict": verdict, "reason": f"{parsed.error}"}
        item = self.memory.add("strategy", [ctx.task.task_id], query=ctx.task.prompt,
                               verdict=verdict, **parsed.value)
        return {"item": item["item_id"], "verdict": verdict}

    async def learn(self, ctx) -> dict:
        """Judges the finished run and stores the strategy extracted from it."""
        verdict = await self._judge(ctx)
        parsed = await self.agent.llm(ctx, baseline_prompts.REASONINGBANK_EXTRACT, {
            "verdict": verdict, "trajectory": common.trajectory_text(ctx.task, ctx.state.attempts)})
        return self._store(parsed, ctx, verdict)


class VerifiedReasoningBankBuilder(ReasoningBankBuilder):
    """The verified-feedback control: the checker's outcomes replace the self-judgement."""
    async def learn(self, ctx) -> dict:
        """Extracts a strategy from the trajectory annotated with every checked outcome and the
        checker's verdict on the last attempt.
        """
        verdict = "success" if common.verified_success(ctx.state.last) else "failure"
        parsed = await self.agent.llm(ctx, baseline_prompts.REASONINGBANK_VERIFIED, {
            "trajectory": common.trajectory_text(ctx.task, ctx.state.attempts, checked=True,
                                                 verdict=f"{verdict} (checked)")})
        return self._store(parsed, ctx, verdict)


class MattsBuilder(ReasoningBankBuilder):
    """The MaTTS control: ``matts_k`` rollouts per construction task, contrasted into one strategy.

    Rollouts of a task are buffered in memory until the last one ends; an interrupted task is
    rerun from its first rollout on resume, since the build loop saves only after whole tasks.
    """
    def __init__(self, agent, memory, settings):
        super().__init__(agent, memory, settings)
        self.k = int(settings["matts_k"])
        self._rollouts: dict[str, list] = {}

    def rollout_agent(self, i: int) -> Agent:
        """The agent for rollout ``i``: same backbone, checker and log, seed offset by ``i`` and at least
        ``matts_temperature``, so the rollouts can differ even when the agent decodes greedily.
        """
        cfg = dataclasses.replace(self.agent.cfg, seed=self.agent.cfg.seed + i,
                                  temperature=max(self.agent.cfg.temperature,
                                                  float(self.settings["matts_temperature"])))
        return Agent(self.agent.backbone, self.agent.evaluator, self.agent.domain, cfg,
                     self.agent.runlog, self.agent.failures)

    async def run_task(self, task, run: str) -> list:
        """Runs the ``matts_k`` rollouts of ``task`` one after another; returns their results."""
        self._rollouts[task.task_id] = []
        return [await self.rollout_agent(i).run(task, self.construction_augmentation(),
                                                phase="construction", run=f"{run}/rollout{i}")
                for i in range(self.k)]

    async def learn(self, ctx) -> dict:
        """Buffers this rollout with its self-judged verdict; after the last one, contrasts them
        all.
        """
        rollouts = self._rollouts.setdefault(ctx.task.task_id, [])
        rollouts.append((ctx.state.attempts, await self._judge(ctx)))
        if len(rollouts) < self.k:
            return {"rollout": len(rollouts), "verdict": rollouts[-1][1]}
        text = "\n\n---\n\n".join(f"Rollout {n} (self-judged {verdict}):\n"
                                  + common.trajectory_text(ctx.task, attempts)
                                  for n, (attempts, verdict) in enumerate(rollouts, 1))
        parsed = await self.agent.llm(ctx, baseline_prompts.MATTS_SELF_CONTRAST,
                                      {"trajectory": text})
        del self._rollouts[ctx.task.task_id]
        verdicts = [v for _, v in rollouts]
        return {"rollouts": len(verdicts), **self._store(parsed, ctx, ",".join(verdicts))}
