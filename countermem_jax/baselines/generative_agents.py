"""Generative Agents baseline (Park et al. 2023, "Generative Agents")."""
import numpy as np

from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.method.prompting import prompts
from countermem_jax.baselines import common


def _normalise(x: np.ndarray) -> np.ndarray:
    """Min-max scaling to [0, 1]; a constant vector becomes 0.5 everywhere, so a component that
    cannot tell the memories apart adds the same amount to each and leaves the ranking alone.
    """
    span = x.max() - x.min() if x.size else 0.0
    return (x - x.min()) / span if span > 0 else np.full_like(x, 0.5)


def retrieval_scores(query: str, items: list, now: int, settings: dict) -> np.ndarray:
    """Park et al.'s retrieval score of every item for ``query`` at construction step ``now``.

    ``settings`` supplies ``recency_decay`` (per step) and the three ``weights`` (recency,
    importance, relevance). Each component is normalised over ``items`` only, i.e. over what
    this task may see, so an excluded same-task memory cannot shift the scale.
    """
    recency = np.array([settings["recency_decay"] ** (now - i["step"]) for i in items], np.float64)
    importance = np.array([i["importance"] for i in items], np.float64)
    relevance = common.similarities(query, [i["text"] for i in items]).astype(np.float64)
    w_rec, w_imp, w_rel = settings["weights"]
    return (w_rec * _normalise(recency) + w_imp * _normalise(importance)
            + w_rel * _normalise(relevance))


class GenerativeAgentsAugmentation(common.MemoryAugmentation):
    """Generative Agents at use time: the top-scoring memories of the stream."""
    kind = "observations and reflections from earlier tasks"

    async def retrieve(self, ctx, draft, items):
        """The ``top_k`` items by retrieval score, each shown with its kind and importance.

        ``now`` is the stream's final construction step: the frozen memory has no clock of its own,
        and evaluation does not advance it.
        """
        if not items:
            return [], [], {}
        scores = retrieval_scores(common.query_text(ctx), items, self.memory.state.get("step", 0),
                                  self.settings)
        order = np.argsort(-scores, kind="stable")[: int(self.settings["top_k"])]
        chosen = [items[i] for i in order]
        return ([f"{i['kind']} (importance {i['importance']}): {i['text']}" for i in chosen],
                [i["item_id"] for i in chosen],
                {"scores": [round(float(scores[i]), 4) for i in order]})


class GenerativeAgentsBuilder(common.Builder):
    """Writes the memory stream during construction: observations per attempt, reflections on a
    threshold. The builder state keeps the step counter and the importance since the last
    reflection, so a resumed build continues the same stream.
    """
    augmentation_cls = GenerativeAgentsAugmentation

    async def _importance(self, ctx, text: str) -> int:
        """The backbone's 1–10 importance of ``text`` (the parser falls back to 5 on a broken
        reply).
        """
        return int((await self.agent.llm(ctx, baseline_prompts.GENERATIVE_AGENTS_IMPORTANCE,
                                         {"memory": text})).value)

    def _remember(self, kind: str, text: str, importance: int, sources) -> dict:
        """Appends a memory at the current step and advances the step counter."""
        state = self.memory.state
        item = self.memory.add(kind, sources, text=text, importance=importance,
                               step=state.get("step", 0))
        state["step"] = state.get("step", 0) + 1
        return item

    async def learn(self, ctx) -> dict:
        """Turns each evaluated attempt of the finished task into a scored observation, reflecting
        whenever the importance sum reaches the threshold. Returns the ids written.
        """
        written, reflections = [], []
        for attempt in ctx.state.attempts:
            text = (f"On task '{prompts.clip(ctx.task.prompt, 'feedback')[:300]}' I tried "
                    f"{attempt.action!r}; feedback: {attempt.outcome.feedback}")
            item = self._remember("observation", text, await self._importance(ctx, text),
                                  [ctx.task.task_id])
            written.append(item["item_id"])
            state = self.memory.state
            state["importance_since_reflection"] = \
                state.get("importance_since_reflection", 0) + item["importance"]
            if state["importance_since_reflection"] >= self.settings["reflection_threshold"]:
                reflections.append(await self._reflect(ctx))
        return {"observations": written, "reflections": reflections}

    async def _reflect(self, ctx) -> str | None:
        """One reflection over the recent window; stored with its importance and its evidence ids.

        The importance sum restarts before the call, so a reply that breaks the contract (None
        returned, nothing stored) does not trigger a reflection at every following observation.
        """
        recent = self.memory.items[-int(self.settings["reflection_window"]):]
        self.memory.state["importance_since_reflection"] = 0
        parsed = await self.agent.llm(ctx, baseline_prompts.GENERATIVE_AGENTS_REFLECT, {
            "trajectory": "\n".join(f"{n}. {i['text']}" for n, i in enumerate(recent, 1))})
        if not parsed.ok:
            return None
        sources = {t for i in recent for t in i["source_task_ids"]}
        item = self._remember("reflection", parsed.value, await self._importance(ctx, parsed.value),
                              sources)
        item["evidence"] = [i["item_id"] for i in recent]
        return item["item_id"]
