"""Best-of-N compute control (paper §4.1, Appendix D.5, template ``BEST_OF_N_JUDGE``)."""
import asyncio
import dataclasses
import logging

from countermem_jax.method.agents import Augmentation, DecisionInfo
from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.method.prompting import prompts

log = logging.getLogger(__name__)


class BestOfNAugmentation(Augmentation):
    """The compute control of Table 1: more current-task candidates, an LLM judge, no memory.

    ``settings`` is the ``best_of_n`` config section: ``k`` extra candidates (K = 4, so
    N = 1 + K = 5, Appendix D.5) sampled at ``temperature``. The verifier never ranks the
    candidates, so the row measures extra inference, not verifier-guided selection.
    """
    name = "best_of_n"

    def __init__(self, agent, settings: dict):
        self.agent, self.k, self.temperature = agent, int(settings["k"]), settings["temperature"]

    async def _candidate(self, ctx, i: int) -> str:
        """Extra candidate ``i`` (1..K), drawn with the draft prompt at a per-decision, per-candidate seed.

        An unparsable reply is kept as raw text rather than dropped, so the judge always sees N
        candidates and candidate numbering does not depend on parse luck.
        """
        params = dataclasses.replace(self.agent.params, temperature=self.temperature,
                                     seed=(self.agent.params.seed or 0) + 1000 * (ctx.decision + 1) + i)
        parsed = await self.agent.llm(ctx, prompts.DRAFT_ACTION, {
            **prompts.task_fields(ctx.task), "instructions": self.agent.domain.instructions,
            "history": self.agent._history(ctx)},
            params=params)
        return parsed.value if parsed.ok else (parsed.raw.strip() or "")

    async def decide(self, ctx, draft: str) -> DecisionInfo:
        """Draws the K extra candidates concurrently, has the backbone judge, executes its choice.

        Logs all candidates, the choice, whether the judge's reply fell back to candidate 1, and the
        start of that reply.
        """
        candidates = [draft] + list(await asyncio.gather(
            *(self._candidate(ctx, i) for i in range(1, self.k + 1))))
        listing = "\n\n".join(f"Candidate {n}:\n```\n{prompts.clip(c, 'action')}\n```"
                              for n, c in enumerate(candidates, 1))
        parsed = await self.agent.llm(ctx, baseline_prompts.BEST_OF_N_JUDGE, {
            "task": ctx.task.visible_text(), "candidates": listing},
            parse_args={"n": len(candidates)})
        choice = int(parsed.value)
        if parsed.used_fallback:
            log.warning("best_of_n: judge broke the CHOICE contract on %s; executing candidate 1",
                        ctx.charge().decision)
        return DecisionInfo(candidates[choice - 1], None, {
            "method": self.name, "candidates": candidates, "choice": choice,
            "judge_fallback": parsed.used_fallback, "judge_reply": parsed.raw[:200]})
