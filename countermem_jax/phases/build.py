"""Phase 1 of Algorithm 1: memory construction on the construction split (paper §3.2–3.3)."""
import functools
import time
from typing import Callable

import tqdm

from countermem_jax import baselines
from countermem_jax.runtime import curves
from countermem_jax.phases import construction_waves as waves, wave_sizes
from countermem_jax.method.agents import Agent, MemoryCalls
from countermem_jax.method.counterfactual import CounterfactualBuilder
from countermem_jax.method import transfer_checks
from countermem_jax.method.memory import load_store, save_store
from countermem_jax.method.memory.reuse import suppressed
from countermem_jax.method.memory.store import MemoryStore
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.runtime import inflight
from countermem_jax.phases import context
from countermem_jax.phases.workdir import Workdir
from countermem_jax.method.selector import policies
from countermem_jax.phases import workdir_guard
from countermem_jax.protocol import construction_tally
from countermem_jax.protocol.construction_tally import empty_store_reason, tally
from countermem_jax.runtime.runlog import RunLog

RUN = "build"  # the construction task runs' name (log events, ledger, the judge's verdict scope)


def _construction_augmentation(method: context.MethodConfig, agent: Agent, index_source, hooks):
    """Module III of one construction task run: the fixed construction policy over the index
    source (the task's view of the store), reuse observations and Modules I–II (after failures)
    through the construction hooks (the run's ``CounterfactualBuilder``)."""
    c = method.construction
    return CounterMemAugmentation(
        MemoryCalls(agent), index_source=index_source, hooks=hooks,
        selector=policies.make_fixed(c.reuse_policy, c.relevance_threshold),
        render_condition=method.use.render_condition, revision=method.use.revision)


class _Ticking:
    """A task run's ledger that also tells the progress bar of each model call it books."""

    def __init__(self, ledger, on_call: Callable[[], None]):
        self.ledger, self.on_call = ledger, on_call

    def record(self, *args, **kwargs) -> None:
        """Books the call in the run's ledger, then ticks."""
        self.ledger.record(*args, **kwargs)
        self.on_call()


def _already_frozen(wd: Workdir) -> dict:
    """The summary of a store frozen by an earlier run: a frozen store is never rebuilt, since
    the selector and evaluation runs of this workdir are tied to its hash (checked against the
    recorded one: a store truncated or replaced since is refused, not reported as built; a
    deleted hash file is restored from the run log, ``Workdir.restore_frozen_hash``)."""
    if not wd.frozen_hash.exists():
        wd.restore_frozen_hash()
    frozen = wd.load_frozen_checked()
    print(f"memory already built and frozen: {len(frozen)} records, hash "
          f"{frozen.content_hash()[:16]} ({wd.frozen})")
    return {"records": len(frozen), "hash": frozen.content_hash()}


async def _construct(cfg, wd: Workdir, ctx: context.PhaseContext,
                     store: MemoryStore) -> tuple[MemoryStore, dict]:
    """Runs the construction tasks not yet processed, ``construction.wave_size`` in flight,
    committed in split order and saved after each (``construction_waves``); returns the final
    store and the waves' totals (re-runs and what they spent)."""
    done = set(store.meta.get("processed_tasks", []))
    construction_cfg = ctx.method.construction
    todo = [t for t in ctx.splits.build if t.task_id not in done]
    wave_size = wave_sizes.construction_wave(cfg.construction.wave_size, ctx.backbone)
    if cfg.construction.wave_size == wave_sizes.AUTO:
        print(f"construction.wave_size=0: {wave_size} tasks in flight, what the servers hold")
    wd.log.write("phase_start", phase="construction", tasks=len(ctx.splits.build),
                 resumed=len(done), wave_size=wave_size)
    # tasks whose events were logged but whose store save a kill cut off: run again, once counted
    logged = {e["task_id"] for e in wd.log.events()
              if e.get("phase") == "construction" and e.get("task_id")} - done
    if logged:
        wd.log.write(construction_tally.REDO, phase="construction", task_ids=sorted(logged))

    async def run_task(task, view: waves.TaskView):
        """One construction task on its view of the store; what it writes (records, reuse
        observations, log events, parse failures, charges) is kept until it commits."""
        agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, view.events,
                      view.failures, checks=ctx.checks, ledger=_Ticking(view.ledger, called))
        builder = CounterfactualBuilder(agent, view, construction_cfg, view.events)
        augmentation = _construction_augmentation(ctx.method, agent, view.index, hooks=builder)
        return await agent.run(task, augmentation, phase="construction", run=RUN)

    solved = 0
    bar = tqdm.tqdm(total=len(todo), desc="build memory", unit="task", dynamic_ncols=True,
                    mininterval=1.0)
    # A CPU task takes minutes: the bar's ``calls`` moves with every model call of the tasks in
    # flight, so the first task's work shows before it is finished (not 0/23 for minutes).
    shown = {"calls": 0}
    last_shown = [0.0]

    def called() -> None:
        shown["calls"] += 1
        if time.monotonic() - last_shown[0] >= 1.0:
            last_shown[0] = time.monotonic()
            bar.set_postfix(shown)
    writer = curves.CurveWriter(wd.curves / "construction")
    # this process's share of checked counterfactual candidates that entered the store
    seq_start, cf_checks = store.next_seq, 0

    def commit(committed: MemoryStore, task, run_ctx, view: waves.TaskView) -> None:
        """Called in split order once a task's run is final: its output is logged and booked,
        then the resume point advances."""
        nonlocal solved, cf_checks
        view.commit(wd.log, ctx.parse_failures, ctx.ledger)  # durable before the store names it
        solved += run_ctx.solved
        done.add(task.task_id)
        committed.meta["processed_tasks"] = sorted(done)
        save_store(committed, wd.store)  # atomic: records and processed ids land together
        shown.update(records=len(committed), solved=solved,
                     tokens=ctx.ledger.total("construction").total)
        bar.set_postfix(shown, refresh=False)
        bar.update(1)
        cf_checks += run_ctx.cf_checks
        replies = ctx.parse_failures.summary()["total"]
        writer.scalars(len(done), {
            "construction/records": len(committed),
            "construction/verified_share": ((committed.next_seq - seq_start) / cf_checks
                                            if cf_checks else None),
            "construction/parse_failures": replies["parse_failures"],
            "construction/truncations": replies["truncated"],
            "construction/tokens": ctx.ledger.total("construction").total})
    try:
        return await waves.InFlight(
            store, run_task, wave_size=wave_size,
            make_index=functools.partial(context.retrieval_index, ctx.method,
                                        construction=True, groups=ctx.splits.groups,
                                        world=context.world_check(ctx),
                                        names=ctx.domain.names),
            make_checker=functools.partial(context.condition_checker, ctx.method), log=wd.log,
            commit=commit, position=len(done)).build(todo)
    finally:
        bar.close()
        writer.close()
        await ctx.backbone.aclose()


async def _transfer(wd: Workdir, ctx: context.PhaseContext, store: MemoryStore) -> dict:
    """Each record's edit replayed on the other construction tasks' failed actions of its
    database and checked (``method/transfer_checks.py``); the evidence goes into the store,
    one "transfer" event per try; returns the totals."""
    cfg = ctx.method.construction
    failed = transfer_checks.failed_actions(wd.log.events("decision"))

    async def check(task, action):
        return await ctx.checks.run(ctx.evaluator.evaluate, ctx.evaluator.reset(task), action)
    evidence, entries = await transfer_checks.transfer_checks(
        store.records, ctx.splits.build, failed, check, cfg.transfer_checks, cfg.epsilon,
        names=ctx.domain.names)
    for record_id, (tries, verified) in evidence.items():
        store.set_transfer(record_id, tries, verified)
    for entry in entries:
        wd.log.write("transfer", phase="construction", **entry)
    save_store(store, wd.store)
    return {"transfer_checks": len(entries),
            "transfer_verified": sum(e["verified"] for e in entries),
            "records_tried": sum(t > 0 for t, _ in evidence.values()),
            "records_transfer_failed": sum(t > 0 and v == 0 for t, v in evidence.values())}


@workdir_guard.guarded_phase("build_memory")  # config checked, phase locked, fingerprint
def build_memory(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    """Phase 1 on the construction split: CounterMem's Modules I–II (§3.2–3.3), or the memory of
    the baseline named by ``cfg.method`` (a no-op for methods without memory). Resumable after a
    kill; the store is frozen at the end. Returns the record count, store hash and tokens."""
    method = cfg.get("method", "countermem")
    # Methods without memory (the base agent alone, Best-of-N) have nothing to build; they exit
    # before the benchmark or the backbone is loaded.
    if method != "countermem" and not baselines.needs_construction(method):
        print(baselines.skip_message(method, "build_memory"))
        return {"method": method, "skipped": True}
    wd = Workdir(workdir_path)
    # a resumed store is read (and a broken one refused) before the backbone is made
    resumed = (load_store(wd.store) if method == "countermem" and wd.store.exists()
               and not wd.frozen.exists() else None)
    ctx = context.setup(cfg, wd, backbone, benchmark)
    if method != "countermem":
        agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.log,
                      ctx.parse_failures, checks=ctx.checks)
        return baselines.build_baseline_memory(method, cfg, agent, ctx.splits.build, wd.root)
    if wd.frozen.exists():
        return _already_frozen(wd)
    store = resumed if resumed is not None else MemoryStore(ctx.method.store)
    constructs = ctx.method.construction.corrections != "within_task"
    wave_totals = {}
    transfer = {}
    if constructs:
        store, wave_totals = inflight.run(_construct(cfg, wd, ctx, store))
        if ctx.method.construction.transfer_checks and ctx.method.construction.corrections \
                == "verified":
            transfer = inflight.run(_transfer(wd, ctx, store))
    else:  # §6.1 "WM without CF" keeps nothing for later tasks: there is no memory to build
        inflight.run(ctx.backbone.aclose())
        print("construction.corrections=within_task: nothing is stored for later tasks, so no "
              "construction task runs; the store stays empty")
    # From here on records and reuse statistics are fixed (§4.2): training and evaluation load
    # this snapshot and refuse it if its content hash changed.
    frozen = store.freeze()
    wd.write_frozen(frozen)
    # The gate's effect on the store (Appendix D.2): records construction stopped offering;
    # they stay in the frozen store, which training and evaluation read without the gate.
    gate = ctx.method.retrieval
    gated = [r.record_id for r in frozen.records
             if suppressed(r, gate.suppress_below, gate.suppress_after_uses)]
    wd.log.write("suppression_gate", phase="construction", suppressed=len(gated),
                 record_ids=gated, below=gate.suppress_below,
                 after_uses=gate.suppress_after_uses)
    summary = {"records": len(frozen), "hash": frozen.content_hash(), "suppressed": len(gated),
               "tasks": len(ctx.splits.build) if constructs else 0,
               "tokens": ctx.ledger.total("construction").total, "waves": wave_totals,
               "transfer": transfer}
    failures = RunLog(wd.parse_failures).events() if wd.parse_failures.exists() else []
    counts = tally(construction_tally.standing(wd.log.events()), failures)
    summary["never_holding_conditions"] = counts["never_holds"]
    summary["repeated_situations"] = counts["repeated_situations"]
    wd.log.write("phase_end", phase="construction", ledger=ctx.ledger.summary(),
                 replies=ctx.parse_failures.summary(), **summary)
    print(f"built {len(frozen)} records from {summary['tasks']} construction tasks; frozen "
          f"store {wd.frozen} (hash {frozen.content_hash()[:16]}); {len(gated)} withheld by the "
          "low-utility gate during construction (offered again from selector training on)")
    if transfer:
        print(f"transfer checks: {transfer['transfer_checks']} replays of "
              f"{transfer['records_tried']} records on other tasks' failed actions, "
              f"{transfer['transfer_verified']} verified; "
              f"{transfer['records_transfer_failed']} records never verified elsewhere (not "
              "offered)")
    if counts["repeated_situations"]:
        print(f"{counts['repeated_situations']} distilled situations repeated themselves "
              "(replaced by their sentences once, or by the edit)")
    if constructs and not len(frozen):
        print(empty_store_reason(counts))
    return summary
