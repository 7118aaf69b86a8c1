"""ExpeL baseline (Zhao et al. 2024, "ExpeL: LLM Agents Are Experiential Learners")."""
import logging

from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.method.prompting import prompts
from countermem_jax.backbones.base import Charge
from countermem_jax.baselines import common

log = logging.getLogger(__name__)

# ExpeL's initial importance of a new insight; AGREE / EDIT add 1, REMOVE takes 1.
START_IMPORTANCE = 2


def room_text(n: int, cap: int) -> str:
    """The "room" line of ``EXPEL_UPDATE``: how many insights exist out of ``cap``, and at the cap
    that ADD will be refused, so the backbone can make room by REMOVE or EDIT instead.
    """
    if n >= cap:
        return f"{n} of at most {cap}: the list is full, so ADD is refused; REMOVE or EDIT instead"
    return f"{n} of at most {cap}"


def apply_operations(memory, ops, cap: int, task_ids) -> list[dict]:
    """Applies parsed EXPEL_UPDATE operations to the memory's insights; returns what happened.

    Indices refer to the list the backbone was shown, so removals never shift later operations.
    """
    shown = memory.of_kind("insight")
    results = []
    for op, index, text in ops:
        if op == "ADD":
            if len(memory.of_kind("insight")) >= cap:
                results.append({"op": op, "applied": False, "reason": "cap", "text": text})
                continue
            item = memory.add("insight", task_ids, text=text, importance=START_IMPORTANCE)
            results.append({"op": op, "applied": True, "item_id": item["item_id"]})
            continue
        item = shown[index]
        if item not in memory.items:
            results.append({"op": op, "applied": False, "reason": "already removed"})
            continue
        if op == "REMOVE":
            item["importance"] -= 1
            if item["importance"] <= 0:
                memory.items.remove(item)
        else:  # AGREE / EDIT
            item["importance"] += 1
            if op == "EDIT":
                item["text"] = text
            item["source_task_ids"] = sorted(set(item["source_task_ids"]) | set(task_ids))
        results.append({"op": op, "applied": True, "item_id": item["item_id"],
                        "importance": item["importance"]})
    return results


class ExpelAugmentation(common.MemoryAugmentation):
    """ExpeL at use time: all visible insights by importance, plus the most similar solved tasks."""
    kind = "insights from earlier tasks and examples of solved tasks"

    async def retrieve(self, ctx, draft, items):
        """Insights (highest importance first) as one entry, then up to ``fewshot_k`` solved examples.

        Every insight the task may see is shown, as in ExpeL; only the examples are retrieved by
        similarity (φ, the shared 512-d embedding) of their task text to the current state.
        """
        insights = sorted((i for i in items if i["kind"] == "insight"),
                          key=lambda i: -i["importance"])
        successes = [i for i in items if i["kind"] == "success"]
        examples = common.top_k(common.query_text(ctx), successes, lambda i: i["task"],
                                int(self.settings["fewshot_k"]))
        entries = []
        if insights:
            entries.append("Insights:\n" + "\n".join(f"{n}. {i['text']}"
                                                     for n, i in enumerate(insights, 1)))
        entries += [f"Example of a solved earlier task:\nTask: {i['task']}\nSolution:\n{i['action']}"
                    for i, _ in examples]
        used = [i["item_id"] for i in insights] + [i["item_id"] for i, _ in examples]
        return entries, used, {"examples": [{"item_id": i["item_id"], "similarity": round(s, 4)}
                                            for i, s in examples]}


class ExpelBuilder(common.Builder):
    """ExpeL's construction: keeps solved trajectories and maintains the insight list by comparison.

    Gathering runs the base agent (``use_during_construction = False``). The builder state holds
    the pending batch of one-shot successes between tasks, so an interrupted build resumes with
    the same batches.
    """
    augmentation_cls = ExpelAugmentation
    use_during_construction = False

    async def learn(self, ctx) -> dict:
        """After a construction task: stores a success, compares what is due, and flushes the last batch
        at the final task. Returns what was compared and which insight operations were applied.
        """
        out = await self._learn_from(ctx)
        if ctx.task.task_id == self.final_task_id and self.memory.state.get("success_batch"):
            # The last, partial success batch is compared within the final construction task,
            # charged to it and booked on its task run (so the cost of building counts it).
            out = dict(out, tail=(await self._update(ctx, *self._take_batch()))[0])
        return out

    async def _learn_from(self, ctx) -> dict:
        """Keeps a verified success and compares: a fail-then-success run at once, a one-shot success
        when its batch is full. Unsolved runs are not compared.
        """
        attempts = ctx.state.attempts
        task_id = ctx.task.task_id
        if not common.verified_success(attempts[-1] if attempts else None):
            return {"compared": None}
        self.memory.add("success", [task_id], task=ctx.task.visible_text(),
                        action=attempts[-1].action)
        trajectory = common.trajectory_text(ctx.task, attempts)
        if len(attempts) > 1:
            return (await self._update(ctx, "A failed and then a successful attempt at the same "
                                       "task:\n" + trajectory, [task_id]))[0]
        pending = self.memory.state.setdefault("success_batch", [])
        pending.append({"task_id": task_id, "trajectory": trajectory})
        if len(pending) < int(self.settings["success_batch"]):
            return {"compared": None, "batched": len(pending)}
        return (await self._update(ctx, *self._take_batch()))[0]

    def _take_batch(self) -> tuple[str, list[str]]:
        """Removes the pending success batch; returns its comparison text and task ids."""
        batch = self.memory.state.pop("success_batch", [])
        text = "Successful attempts at different tasks:\n\n" + "\n\n---\n\n".join(
            b["trajectory"] for b in batch)
        return text, [b["task_id"] for b in batch]

    async def _update(self, ctx, experience: str, task_ids: list[str],
                      charge=None) -> tuple[dict, int]:
        """One ``EXPEL_UPDATE`` call over the current insights; applies the parsed operations.

        Called inside a task (``ctx``, charged to it) or, for a leftover batch, with an explicit
        ``charge``. Returns (log fields, tokens spent). A reply that does not parse applies nothing.
        """
        insights = self.memory.of_kind("insight")
        cap = int(self.settings["max_insights"])
        fields = {"room": room_text(len(insights), cap),
                  "insights": "\n".join(f"{n}. {i['text']}" for n, i in enumerate(insights, 1))
                  or "(none yet)", "experience": experience}
        parse_args = {"n": len(insights)}
        update = baseline_prompts.EXPEL_UPDATE
        if ctx is not None:
            parsed = await self.agent.llm(ctx, update, fields, parse_args=parse_args)
        else:
            parsed = await prompts.call_template(self.agent.backbone, update, fields,
                                                 charge=charge, params=self.agent.params,
                                                 parse_args=parse_args,
                                                 failures=self.agent.failures)
        ops = parsed.value if parsed.ok else []
        results = apply_operations(self.memory, ops, cap, task_ids)
        for r in results:
            if not r["applied"]:
                log.info("expel: %s refused (%s)", r["op"], r["reason"])
        return {"compared": task_ids, "operations": results}, parsed.tokens

    async def finalize(self, save) -> None:
        """A batch still pending here (a memory whose final task was processed by an older build)
        is compared outside any task, charged to ``build-expel/insights-tail`` and logged."""
        if not self.memory.state.get("success_batch"):
            return
        experience, task_ids = self._take_batch()
        charge = Charge("construction", f"build-{self.method}/insights-tail")
        out, tokens = await self._update(None, experience, task_ids, charge=charge)
        self.log(f"build-{self.method}", "", tokens=tokens, **out)
        save()
