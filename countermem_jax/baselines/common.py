"""What every baseline mechanism shares: retrieval helpers, the use-time augmentation and the
construction-time builder on the agents' common interface (paper §4.1, App. D.5).
"""
import numpy as np

from countermem_jax.method.agents import Augmentation, DecisionInfo
from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.method.prompting import prompts
from countermem_jax.method.memory import reuse as reuse_lib
from countermem_jax.method.memory_use import state_text
from countermem_jax.method import text_embedding as embedding


def eligible(items, task_id: str, groups=None) -> tuple[list, list[str]]:
    """Items the current task may see, and the ids excluded because the task, or a task of its
    reference group (``groups``: task id -> group id), wrote them.

    The exclusion CounterMem applies to its records (Eq. 7, widened to the reference group),
    applied to every baseline, so no row can retrieve a trace of the task it is solving or of
    its twin.
    """
    groups = groups or {}
    own = groups.get(task_id)
    keep, excluded = [], []
    for item in items:
        sources = item["source_task_ids"]
        twin = own is not None and any(groups.get(s) == own for s in sources)
        (excluded.append(item["item_id"]) if task_id in sources or twin else keep.append(item))
    return keep, excluded


def similarities(query: str, texts: list[str]) -> np.ndarray:
    """Cosine similarity of the query to each text (the shared 512-dim embedding φ)."""
    if not texts:
        return np.zeros(0, np.float32)
    emb = embedding.embed_texts([query] + list(texts))
    return emb[1:] @ emb[0]


def top_k(query: str, items: list, text_of, k: int) -> list[tuple[object, float]]:
    """The k items most similar to the query (ties keep memory order)."""
    sims = similarities(query, [text_of(i) for i in items])
    order = np.argsort(-sims, kind="stable")[:k]
    return [(items[i], float(sims[i])) for i in order]


def trajectory_text(task, attempts, *, checked: bool = False, verdict: str | None = None) -> str:
    """A task run as the extraction prompts see it: the task, each action and the feedback the
    agent saw; with ``checked``, each step's checked outcome (utility, success, completed)."""
    lines = [f"Task: {task.visible_text()}"]
    for i, a in enumerate(attempts, 1):
        step = f"Attempt {i}:\n```\n{prompts.clip(a.action, 'action')}\n```\nFeedback: " \
               f"{prompts.clip(a.outcome.feedback, 'feedback')}"
        if checked:
            o = a.outcome
            step += (f"\nChecked outcome: utility {o.utility:.2f}, "
                     f"{'success' if o.success else 'failure'}"
                     f"{'' if o.completed else ' (check did not complete)'}")
        lines.append(step)
    if verdict:
        lines.append(f"Final verdict: {verdict}")
    return "\n\n".join(lines)


def verified_success(attempt) -> bool:
    """The checker completed and confirmed success (the only evidence of success we accept)."""
    return attempt is not None and attempt.outcome.completed and attempt.outcome.success


class MemoryAugmentation(Augmentation):
    """Use-time side of a memory mechanism: retrieve → revise the draft with it. Never writes.

    Subclasses implement ``retrieve(ctx, draft, items) -> (entries, used_ids, log)`` over the
    items the task may see; ``kind`` names the memory in the prompt.
    """
    kind = "memory"

    def __init__(self, agent, memory, settings: dict, groups=None):
        self.agent, self.memory, self.settings = agent, memory, settings
        self.groups = dict(groups or {})   # task id -> reference group id (``eligible``)
        self.name = memory.method
        if memory.frozen:
            memory.verify()

    async def retrieve(self, ctx, draft: str, items: list) -> tuple[list[str], list[str], dict]:
        """What to show for this decision: (rendered entries, ids of the items shown, log fields).

        ``items`` are already filtered by same-task exclusion; an empty entry list means the draft
        runs unchanged (no revision call, no tokens spent on memory).
        """
        raise NotImplementedError

    async def decide(self, ctx, draft: str) -> DecisionInfo:
        """Retrieves from the memory and, when something was found, has the backbone revise the draft.

        The decision's log records coverage, the excluded same-task items and what was shown, so the
        baselines' retrieval coverage is computed with CounterMem's denominator (Appendix D.4). A
        revision that fails to parse falls back to the draft.
        """
        items, excluded = eligible(self.memory.items, ctx.task.task_id, self.groups)
        entries, used, log = await self.retrieve(ctx, draft, items)
        log = {"method": self.name, "memory_items": len(self.memory.items),
               "excluded_same_task": excluded, "covered": bool(entries), "retrieved": used, **log}
        info = DecisionInfo(draft, None, log)
        if entries:
            parsed = await self.agent.llm(ctx, baseline_prompts.REVISE_WITH_MEMORY, {
                **prompts.task_fields(ctx.task), "draft": draft,
                "memory": baseline_prompts.render_memory_block(self.kind, entries),
                "instructions": self.agent.domain.instructions})
            info.action = parsed.value if parsed.ok else draft
            info.record_id = ",".join(used)   # the items shown, for the reuse metrics
            log["record_id"] = info.record_id
        return info

    async def observe(self, ctx, draft, info, outcome, previous_utility) -> dict:
        """The reuse label of Appendix B.3 for a decision that showed memory, for the harmful-use metric.

        Only logged: a baseline's memory is never updated from use at evaluation.
        """
        if info.record_id is None:
            return {}
        return {"record_id": info.record_id,
                "label": reuse_lib.reuse_label(draft, info.action, outcome.success,
                                               outcome.utility, previous_utility)}

    async def end_task(self, ctx) -> None:
        """Re-verifies a frozen memory's hash after every task (evaluation must not write)."""
        if self.memory.frozen:
            self.memory.verify()  # evaluation never changes the memory; refuse if it did


class SimilarityAugmentation(MemoryAugmentation):
    """Retrieval by one field's similarity to the task's state: the ``top_k`` items whose
    ``match_field`` is most similar, each shown as ``render(item)``."""
    match_field = "text"

    def render(self, item) -> str:
        """How one retrieved item is shown to the backbone (one entry of the memory block)."""
        raise NotImplementedError

    async def retrieve(self, ctx, draft, items):
        """The ``top_k`` items by similarity of ``match_field`` to the task state."""
        chosen = top_k(query_text(ctx), items, lambda i: i[self.match_field],
                       int(self.settings["top_k"]))
        return [self.render(i) for i, _ in chosen], [i["item_id"] for i, _ in chosen], {
            "similarities": [round(s, 4) for _, s in chosen]}


def query_text(ctx) -> str:
    """What a task's retrieval matches memory against (the same text CounterMem retrieves with)."""
    return state_text(ctx)


class _Learning(Augmentation):
    """Construction: the mechanism's use-time behaviour plus the builder's write after the run."""

    def __init__(self, inner: Augmentation, builder: "Builder"):
        self.inner, self.builder, self.name = inner, builder, builder.method

    async def decide(self, ctx, draft):
        """Delegates to the mechanism's use-time augmentation (or none)."""
        return await self.inner.decide(ctx, draft)

    async def observe(self, ctx, draft, info, outcome, previous_utility):
        """Delegates to the mechanism's use-time augmentation."""
        return await self.inner.observe(ctx, draft, info, outcome, previous_utility)

    async def end_task(self, ctx) -> None:
        """Closes the inner augmentation, then lets the builder write memory from this run.

        The builder's tokens are measured as the growth of ``ctx.tokens`` and logged with what it wrote.
        """
        await self.inner.end_task(ctx)
        before = ctx.tokens
        written = await self.builder.learn(ctx) or {}
        self.builder.log(ctx.run, ctx.task.task_id, tokens=ctx.tokens - before, **written)


class Builder:
    """Construction-time side of a mechanism: the only code that writes its memory.

    ``learn(ctx)`` reads a finished construction-task run (trajectory with checked outcomes) and
    writes memory, making its LLM calls with ``self.agent.llm(ctx, ...)`` — charged to the task in
    the construction phase and added to ``ctx.tokens``.
    """
    augmentation_cls = MemoryAugmentation
    use_during_construction = True   # the original consults its memory while gathering experience
    final_task_id = None             # the last construction task (set by the build loop)
    groups: dict = {}                # construction task id -> reference group (the build loop)

    def __init__(self, agent, memory, settings: dict):
        self.agent, self.memory, self.settings = agent, memory, settings
        self.method = memory.method

    def construction_augmentation(self) -> Augmentation:
        """The augmentation a construction task runs with: the mechanism's own retrieval when the
        original system consults memory while gathering experience, wrapped so that the builder
        learns after each run.
        """
        inner = (self.augmentation_cls(self.agent, self.memory, self.settings, self.groups)
                 if self.use_during_construction else Augmentation())
        return _Learning(inner, self)

    async def run_task(self, task, run: str) -> list:
        """Runs one construction task (one agent run; MaTTS overrides this to run several) and returns
        the task results.
        """
        return [await self.agent.run(task, self.construction_augmentation(), phase="construction",
                                     run=run)]

    async def learn(self, ctx) -> dict:
        """Writes memory from the finished run in ``ctx``; returns fields for the construction log.
        """
        raise NotImplementedError

    async def finalize(self, save) -> None:
        """After the last construction task (``save()`` persists progress)."""

    def log(self, run: str, task_id: str, **fields) -> None:
        """One ``baseline_memory`` event: what the builder did after a task and the memory size."""
        if self.agent.runlog:
            self.agent.runlog.write("baseline_memory", method=self.method, run=run, phase="construction",
                                    task_id=task_id, items=len(self.memory.items), **fields)
