"""Phase 1 of Algorithm 1: memory construction on the construction split (paper §3.2–3.3).

CounterMem runs the base agent on each construction task with retrieval over the store as it
grows; after a failure Modules I–II propose ≤ K local edits, check them from the same state and
admit verified improvements as records. The store is saved atomically after every task with the
processed task ids in its header, so a killed run resumes where it stopped; at the end it is
frozen and its content hash written for the later phases. A baseline method (``cfg.method``)
builds its own memory instead (``countermem_jax.baselines``), or skips a phase it has no use for.
"""
import asyncio

import tqdm

from countermem_jax import baselines
from countermem_jax.agents import Agent
from countermem_jax.counterfactual import CounterfactualBuilder
from countermem_jax.memory import load_frozen, load_store, save_store
from countermem_jax.memory.store import MemoryStore
from countermem_jax.memory_use import CounterMemAugmentation
from countermem_jax.phases import context
from countermem_jax.phases.workdir import Workdir
from countermem_jax.selector import policies
from countermem_jax import workdir_guard


def _growing_index(cfg, store: MemoryStore, checker):
    """An index source that follows the store: rebuilt only when its content hash changed."""
    cache = {}

    def current():
        key = store.content_hash()
        if key not in cache:
            cache.clear()
            cache[key] = context.retrieval_index(cfg, store.records, checker)
        return cache[key]
    return current


def _construction_augmentation(cfg, agent: Agent, store: MemoryStore, builder, index_source):
    """Module III during construction: the fixed construction policy over the growing store,
    reuse statistics updated after each use, Modules I–II after failures."""
    return CounterMemAugmentation(
        agent, phase="construction", store=store, builder=builder, index_factory=index_source,
        selector=policies.make_fixed(cfg.construction.reuse_policy,
                                     cfg.construction.relevance_threshold),
        render_condition=cfg.memory.render_condition)


def _already_frozen(wd: Workdir) -> dict:
    frozen = load_frozen(wd.frozen)
    print(f"memory already built and frozen: {len(frozen)} records, hash "
          f"{frozen.content_hash()[:16]} ({wd.frozen})")
    return {"records": len(frozen), "hash": frozen.content_hash()}


async def _construct(cfg, wd: Workdir, ctx: context.PhaseContext, store: MemoryStore) -> None:
    """Runs the construction tasks not yet processed, in split order, saving after each."""
    done = set(store.meta.get("processed_tasks", []))
    agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.log)
    builder = CounterfactualBuilder(agent, store, context.construction_config(cfg), wd.log)
    augmentation = _construction_augmentation(
        cfg, agent, store, builder, _growing_index(cfg, store, context.condition_checker(cfg)))
    todo = [t for t in ctx.splits.build if t.task_id not in done]
    wd.log.write("phase_start", phase="construction", tasks=len(ctx.splits.build),
                 resumed=len(done))
    solved = 0
    bar = tqdm.tqdm(todo, desc="build memory", unit="task", dynamic_ncols=True, mininterval=1.0)
    try:
        for task in bar:
            run_ctx = await agent.run(task, augmentation, phase="construction", run="build")
            solved += run_ctx.solved
            done.add(task.task_id)
            store.meta["processed_tasks"] = sorted(done)
            save_store(store, wd.store)  # atomic: records and processed ids land together
            bar.set_postfix(records=len(store), solved=solved,
                            tokens=ctx.ledger.total("construction").total)
    finally:
        await ctx.backbone.aclose()


@workdir_guard.guarded_phase("build_memory")  # config checked, phase locked, fingerprint
def build_memory(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    """Phase 1 on the construction split: CounterMem's Modules I–II (§3.2–3.3), or the memory of
    the baseline named by ``cfg.method`` (a no-op for methods without memory). Resumable after a
    kill; the store is frozen at the end. Returns the record count, store hash and tokens."""
    method = cfg.get("method", "countermem")
    if method != "countermem" and not baselines.needs_construction(method):
        print(baselines.skip_message(method, "build_memory"))
        return {"method": method, "skipped": True}
    wd = Workdir(workdir_path)
    ctx = context.setup(cfg, wd, backbone, benchmark)
    if method != "countermem":
        agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.log)
        return baselines.build_baseline_memory(method, cfg, agent, ctx.splits.build, wd.root)
    if wd.frozen.exists():
        return _already_frozen(wd)
    store = load_store(wd.store) if wd.store.exists() else MemoryStore(context.store_config(cfg))
    constructs = cfg.construction.corrections != "within_task"
    if constructs:
        asyncio.run(_construct(cfg, wd, ctx, store))
    else:  # §6.1 "WM without CF" keeps nothing for later tasks: there is no memory to build
        asyncio.run(ctx.backbone.aclose())
        print("construction.corrections=within_task: nothing is stored for later tasks, so no "
              "construction task runs; the store stays empty")
    frozen = store.freeze()
    wd.write_frozen(frozen)
    summary = {"records": len(frozen), "hash": frozen.content_hash(),
               "tasks": len(ctx.splits.build) if constructs else 0,
               "tokens": ctx.ledger.total("construction").total}
    wd.log.write("phase_end", phase="construction", ledger=ctx.ledger.summary(), **summary)
    print(f"built {len(frozen)} records from {summary['tasks']} construction tasks; frozen "
          f"store {wd.frozen} (hash {frozen.content_hash()[:16]})")
    return summary
