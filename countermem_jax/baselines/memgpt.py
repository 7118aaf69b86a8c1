"""MemGPT baseline (Packer et al. 2023, "MemGPT: Towards LLMs as Operating Systems")."""
from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.baselines import common

# The function-call surface: all four at construction, search only at use.
ALL_TOOLS = ("core_memory_append", "core_memory_replace", "archival_memory_insert",
             "archival_memory_search")
SEARCH_ONLY = ("archival_memory_search",)
BLOCKS = ("persona", "task")


def core_text(blocks, block_chars: int) -> str:
    """Core memory as the prompts show it: each block with its fill level against ``block_chars``.
    """
    return "\n".join(f"[{b['block']}] ({len(b['text'])}/{block_chars} chars)\n{b['text'] or '(empty)'}"
                     for b in blocks)


def search(items: list, query: str, page_size: int) -> list:
    """``archival_memory_search``: the ``page_size`` archival passages most similar to ``query``."""
    passages = [i for i in items if i["kind"] == "archival"]
    return [i for i, _ in common.top_k(query, passages, lambda i: i["text"], page_size)]


def execute(memory, call: dict, task_id: str, settings: dict) -> str:
    """Runs one construction-time memory call; returns the function's result for the model."""
    name, args = call["name"], call["arguments"]
    budget = int(settings["block_chars"])
    if name == "archival_memory_insert":
        item = memory.add("archival", [task_id], text=args["content"])
        return f"inserted passage {item['item_id']}"
    if name == "archival_memory_search":
        found = search(memory.items, args["query"], int(settings["page_size"]))
        return "results: " + (" | ".join(i["text"] for i in found) or "none")
    block = next((b for b in memory.of_kind("core") if b["block"] == args["block"]), None)
    if block is None:
        return f"error: no core block {args['block']!r}; blocks are {', '.join(BLOCKS)}"
    if name == "core_memory_append":
        new = (block["text"] + "\n" + args["content"]).strip()
    elif args["old_content"] and args["old_content"] in block["text"]:
        new = block["text"].replace(args["old_content"], args["new_content"], 1)
    else:
        return f"error: old_content not found in block {args['block']!r}"
    if len(new) > budget:
        return (f"error: block {args['block']!r} would hold {len(new)} characters, over its "
                f"{budget}-character limit; shorten or replace text instead")
    block["text"] = new
    block["source_task_ids"] = sorted(set(block["source_task_ids"]) | {task_id})
    return f"block {args['block']!r} now holds {len(new)}/{budget} characters"


class MemgptAugmentation(common.MemoryAugmentation):
    """MemGPT at use time: core memory always, archival passages only where the model searches."""
    kind = "core memory and archival passages"

    async def retrieve(self, ctx, draft, items):
        """Shows core memory and, when passages exist, lets the backbone search the archive.

        Results are de-duplicated across searches and admitted in order while they fit
        ``context_chars``; the rest are dropped and logged. Only search is offered: the parser
        refuses any write call, so a frozen memory cannot be asked to change.
        """
        block_chars = int(self.settings["block_chars"])
        core = [i for i in items if i["kind"] == "core" and i["text"]]
        archival = [i for i in items if i["kind"] == "archival"]
        calls, found = [], []
        if archival:
            parsed = await self.agent.llm(ctx, baseline_prompts.MEMGPT_RECALL, {
                "core": core_text(core, block_chars), "n_archival": len(archival),
                "task": ctx.task.visible_text(), "draft": draft},
                parse_args={"allowed": SEARCH_ONLY})
            calls = parsed.value or []
            for call in calls:
                for item in search(archival, call["arguments"]["query"],
                                   int(self.settings["page_size"])):
                    if item not in found:
                        found.append(item)
        entries = [f"Core memory:\n{core_text(core, block_chars)}"] if core else []
        budget = int(self.settings["context_chars"]) - sum(len(e) for e in entries)
        shown, dropped = [], []
        for item in found:
            cost = len(f"Archival passage: {item['text']}")
            if cost > budget:
                dropped.append(item["item_id"])
                continue
            shown.append(item)
            budget -= cost
        entries += [f"Archival passage: {i['text']}" for i in shown]
        return entries, [i["item_id"] for i in core + shown], {
            "searches": [c["arguments"]["query"] for c in calls], "dropped_for_budget": dropped}


class MemgptBuilder(common.Builder):
    """Manages MemGPT's memory during construction by executing the backbone's function calls.

    A new memory starts with a short persona block and an empty task block.
    """
    augmentation_cls = MemgptAugmentation

    def __init__(self, agent, memory, settings):
        super().__init__(agent, memory, settings)
        if not memory.of_kind("core"):
            memory.add("core", [], block="persona",
                       text=f"I solve {agent.domain.name} tasks whose actions are checked by "
                            f"{agent.evaluator.name}. I keep short notes that help later tasks.")
            memory.add("core", [], block="task", text="")

    async def learn(self, ctx) -> dict:
        """Presents the finished task as an event and executes the memory calls the backbone makes.

        Loops for at most ``max_steps`` steps, continuing only while a step searched (MemGPT's
        heartbeat: the model sees the results before deciding more). Returns the calls and the
        start of each result.
        """
        settings, task_id = self.settings, ctx.task.task_id
        event = common.trajectory_text(ctx.task, ctx.state.attempts) + \
            f"\n\nResult: {'solved' if ctx.solved else 'not solved'}"
        results, executed = "", []
        for _ in range(int(settings["max_steps"])):
            archival = [i for i in self.memory.items if i["kind"] == "archival"]
            parsed = await self.agent.llm(ctx, baseline_prompts.MEMGPT_MANAGE, {
                "block_chars": settings["block_chars"],
                "core": core_text(self.memory.of_kind("core"), int(settings["block_chars"])),
                "n_archival": len(archival), "results": results, "event": event},
                parse_args={"allowed": ALL_TOOLS})
            outputs = [(c["name"], execute(self.memory, c, task_id, settings))
                       for c in parsed.value or []]
            executed += outputs
            if not any(name == "archival_memory_search" for name, _ in outputs):
                break
            results = "Function results from your last step:\n" + "\n".join(
                f"{name}: {out}" for name, out in outputs) + "\n"
        return {"calls": [{"name": n, "result": r[:200]} for n, r in executed]}
