"""Phase 3 of Algorithm 1: held-out evaluation with frozen memory and selector (paper §4,
Appendix C.3, D.4).
"""
import dataclasses
import functools
import json

import numpy as np
import tqdm

from countermem_jax import baselines
from countermem_jax.runtime import curves, inflight
from countermem_jax.protocol import intervals, metrics, provenance
from countermem_jax.method.agents import Agent, Augmentation, MemoryCalls
from countermem_jax.runtime.inflight import CheckerPool
from countermem_jax.method.counterfactual import CounterfactualBuilder, WithinTaskChecks
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.phases import context
from countermem_jax.phases.workdir import PhaseError, Workdir
from countermem_jax.method.retrieval import batching
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.method.selector import checkpoint, policies
from countermem_jax.phases import workdir_guard

# How a method's row is labelled in evaluate's table (paper Table 1 names).
METHOD_LABELS = {"countermem": "CounterMem", "none": "None", "best_of_n": "Best-of-N",
                 "expel": "ExpeL", "generative_agents": "GenerativeAgents", "voyager": "Voyager",
                 "memgpt": "MemGPT", "reasoningbank": "ReasoningBank",
                 "reasoningbank_matts": "ReasoningBank+MaTTS",
                 "reasoningbank_verified": "ReasoningBank+verified"}


@dataclasses.dataclass
class EvalRun:
    """One evaluation run: its name (= directory), selector seed, agent and augmentation."""
    name: str
    seed: int | None
    agent: Agent
    augmentation: Augmentation


@dataclasses.dataclass
class _MemoryPlan:
    """What a method evaluates with: its runs besides the base, how to fingerprint its frozen
    artefacts, the line describing it, and where its metrics go."""
    runs: list
    check_artefacts: object
    store_line: str
    metrics_path: object
    store: dict | None = None
    checkpoints: dict | None = None   # {seed: the checkpoint directory evaluated}


def _countermem_plan(cfg, wd: Workdir, ctx: context.PhaseContext,
                     checks: CheckerPool) -> _MemoryPlan:
    """One CounterMem run per DQN seed (or one for a fixed selector) over the frozen store; the
    retrievals and selector passes of the decisions in flight (all runs) are scored together."""
    frozen = wd.load_frozen_checked()  # refused if the store differs from its recorded hash
    # One index and one selection batcher for all runs: decisions of different seeds in flight
    # together are scored in one batch, with the one-at-a-time result (retrieval/batching.py).
    index = batching.BatchedIndex(
        context.retrieval_index(ctx.method, frozen.records, context.condition_checker(ctx.method),
                                evaluation=True, groups=ctx.splits.groups,
                                world=context.world_check(ctx), names=ctx.domain.names),
        batching.retrieval_batcher())
    selections = batching.selection_batcher()
    # (run name, seed, selector, checkpoint fingerprint): a fixed policy has neither seed nor
    # checkpoint; the DQN has one run per selector seed, restored at its best step (App. C.3).
    if cfg.eval.selector != "dqn":
        selector = policies.make_fixed(cfg.eval.selector, cfg.eval.relevance_threshold)
        selected = [(f"countermem-{selector.name}", None, selector, None)]
        metrics_path = wd.root / f"metrics_{selector.name}.json"
    else:
        seeds = tuple(int(s) for s in (cfg.eval.seeds or cfg.selector.seeds))
        selected = [(f"countermem-dqn-seed{s}", s, *wd.restore_seed(s)) for s in seeds]
        metrics_path = wd.metrics
    runs = []
    for name, seed, selector, _ in selected:
        agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.run_log(name),
                      ctx.parse_failures, checks=checks)
        augmentation = CounterMemAugmentation(
            MemoryCalls(agent), index_source=lambda: index,
            selector=batching.BatchedSelector(selector, selections),
            render_condition=(ctx.method.use.render_condition
                              and not ctx.method.retrieval.remove_conditions),
            revision=ctx.method.use.revision)
        # The §6.1 ablation "WM without CF": test-time checks against the task's own reference
        # (an oracle search outside the attempt budget, not a memory; counted in its calls).
        if ctx.method.construction.corrections == "within_task":
            augmentation = WithinTaskChecks(augmentation, CounterfactualBuilder(
                agent, None, ctx.method.construction, agent.runlog))
        runs.append(EvalRun(name, seed, agent, augmentation))
    # Store and checkpoints are fingerprinted before and after the runs (frozen, Algorithm 1).
    checkpoints = {seed: ckpt for _, seed, _, ckpt in selected if ckpt is not None}
    return _MemoryPlan(
        runs, functools.partial(wd.artefact_fingerprints, frozen, checkpoints),
        f"store {frozen.content_hash()[:12]} ({len(frozen)} records), selector "
        f"{cfg.eval.selector}", metrics_path,
        {"hash": frozen.content_hash(), "records": len(frozen)}, checkpoints)


def _baseline_plan(cfg, method: str, wd: Workdir, ctx: context.PhaseContext,
                   checks: CheckerPool) -> _MemoryPlan:
    """A baseline row: the same agent, backbone, budgets and tasks; its frozen memory."""
    runs = []  # method "none" is the base agent alone: no run besides it
    if method != "none":
        agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.run_log(method),
                      ctx.parse_failures, checks=checks)
        runs.append(EvalRun(method, None, agent,
                            baselines.make_baseline_augmentation(method, cfg, agent, wd.root,
                                                                 ctx.splits.groups)))
    return _MemoryPlan(runs, functools.partial(baselines.memory_fingerprint, method, wd.root),
                       f"method {method}", wd.metrics)


async def _run_all(cfg, runs: list, eval_tasks, ctx: context.PhaseContext,
                   curve_root) -> None:
    """Runs the unfinished tasks of every evaluation run in one pool (not one run after the
    other) holding ``eval.concurrency`` evaluation tasks in flight, each with all its runs:
    jobs start task by task, all runs of a task together, so the memory-free drafts that base
    and CounterMem runs share are in flight together and computed once (the response cache's
    single flight). Counting tasks, not task runs, keeps ``eval.concurrency`` distinct drafts
    at the server however many runs share them; ``backbone.max_concurrency`` caps the requests
    the runs then make."""
    # A task a run already finished (its task_end is logged) is not run again on resume.
    finished = {run.name: run.agent.runlog.finished(run.name) for run in runs}
    jobs = [functools.partial(run.agent.run, task, run.augmentation, phase="evaluation",
                              run=run.name, extra={} if run.seed is None else {"seed": run.seed})
            for task in eval_tasks for run in runs if task.task_id not in finished[run.name]]
    job_runs = [run.name for task in eval_tasks for run in runs
                if task.task_id not in finished[run.name]]
    bar = tqdm.tqdm(total=len(jobs), desc=f"evaluate {len(runs)} runs", unit="task",
                    dynamic_ncols=True, mininterval=1.0)
    writers = {run.name: curves.CurveWriter(curve_root / run.name) for run in runs}
    scores = {run.name: [] for run in runs}

    def progress(i, task_ctx):
        """One finished task: advance the bar, show the evaluation's tokens so far, and write
        its run's running score (share solved of the tasks this process finished)."""
        bar.update(1)
        bar.set_postfix(tokens=ctx.ledger.total("evaluation").total, refresh=False)
        done = scores[job_runs[i]]
        done.append(float(task_ctx.solved))
        writers[job_runs[i]].scalars(len(done), {"eval/running_score": float(np.mean(done))})
    try:
        await inflight.run_bounded(jobs, max(1, cfg.eval.concurrency) * len(runs), progress)
    finally:
        bar.close()
        for writer in writers.values():
            writer.close()
        await ctx.backbone.aclose()


@workdir_guard.guarded_phase("evaluate")  # config checked, phase locked, fingerprint
def evaluate(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    """The base agent once and one CounterMem run per selector seed (or the baseline named by
    ``cfg.method``), each in its own run directory ``WORKDIR/eval/<run>/``; the aggregate over
    seeds, with 95% bootstrap CIs and the cost of building, in ``WORKDIR/metrics.json``."""
    method = cfg.get("method", "countermem")  # or a baseline's name (Appendix D.5)
    wd = Workdir(workdir_path)
    if method == "countermem":  # no store, or a changed one: refused before the backbone
        wd.load_frozen_checked()
    if method == "countermem" and cfg.eval.selector == "dqn":  # refused before the backbone
        for seed in (cfg.eval.seeds or cfg.selector.seeds):
            checkpoint.check_metrics_files(wd.seed_dir(int(seed)))
    ctx = context.setup(cfg, wd, backbone, benchmark)
    checks = ctx.checks  # one pool for the checks of every run
    base_agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.run_log("base"),
                       ctx.parse_failures, checks=checks)
    plan = (_countermem_plan(cfg, wd, ctx, checks) if method == "countermem"
            else _baseline_plan(cfg, method, wd, ctx, checks))
    # The base agent (no memory, §4.1) runs beside the method on the same held-out tasks, so
    # every comparison with it is paired over tasks.
    runs = [EvalRun("base", None, base_agent, Augmentation()), *plan.runs]
    before = plan.check_artefacts()
    wd.log.write("phase_start", phase="evaluation", verified=before, runs=[r.name for r in runs])
    with checks:
        inflight.run(_run_all(cfg, runs, ctx.splits.eval, ctx, wd.curves / "eval"))
    # The frozen memory and selector must be bit-identical after evaluation (no test-time
    # learning, §4.2); a change is an error, not a warning.
    after = plan.check_artefacts()
    if after != before:
        raise PhaseError(f"frozen artefacts changed during evaluation: {before} -> {after}")
    result = _evaluation_metrics(cfg, wd, ctx.splits, runs)
    result["method"] = method
    if method == "countermem":   # how a chosen record revised the draft (metrics.comparison_table)
        result["revision"] = ctx.method.use.revision
    result["verified_unchanged"] = after
    result["code_version"] = provenance.code_version()  # the report refuses mixed versions
    if plan.store is not None:
        result["store"] = plan.store
    if plan.checkpoints:   # which checkpoint each seed used: its step and fingerprint
        result["checkpoints"] = wd.checkpoint_provenance(plan.checkpoints)
    plan.metrics_path.write_text(json.dumps(result, indent=1, default=str))
    # Print the comparison table (Table 1 row) and where everything was written.
    agent_name = "ReAct" if cfg.agent.kind == "react" else "Reflexion"
    table = metrics.comparison_table(result, agent_name, METHOD_LABELS.get(method, method))
    verified = "frozen memory verified unchanged; " if after else ""  # none, best_of_n: no memory
    print(f"\n{cfg.data.benchmark}: {len(ctx.splits.eval)} held-out tasks, {plan.store_line}\n"
          f"{table}\n{verified}metrics in {plan.metrics_path}, per run in "
          f"{wd.eval_runs}/<run>/")
    wd.log.write("phase_end", phase="evaluation", metrics_file=str(plan.metrics_path),
                 ledger=ctx.ledger.summary(), replies=ctx.parse_failures.summary())
    return result


def _run_ends(run_log: RunLog, run: str, eval_ids: set) -> tuple[list, list]:
    """A run's last task_end per held-out task and its completed decisions."""
    ends = list({e["task_id"]: e for e in run_log.events("task_end")
                 if e["run"] == run and e["task_id"] in eval_ids}.values())
    decisions = [e for e in run_log.completed_decisions(run) if e["task_id"] in eval_ids]
    return ends, decisions


def _evaluation_metrics(cfg, wd: Workdir, sp, runs: list) -> dict:
    """Per-run metrics (written to each run directory) and their aggregate over seeds."""
    eval_ids = {t.task_id for t in sp.eval}
    ends, decisions = {}, {}
    for run in runs:
        ends[run.name], decisions[run.name] = _run_ends(run.agent.runlog, run.name, eval_ids)
    # The compared rows; method "none" has no row of its own: it is the base agent (Table 1).
    seeds = {r.name: r.seed for r in runs if r.name != "base"} or {"base": None}
    key = {run: ("fixed" if seed is None else str(seed)) for run, seed in seeds.items()}
    aggregate = metrics.seed_aggregate(ends["base"], {key[r]: ends[r] for r in seeds},
                                       {key[r]: decisions[r] for r in seeds},
                                       decisions["base"], group_of=dict(sp.groups))
    base = metrics.run_metrics(ends["base"], decisions["base"])
    # Each run directory also gets its own metrics.json (its row, with the paired comparison).
    for run in runs:
        per_run = base if run.name == "base" else dict(
            aggregate["per_seed"][key[run.name]], paired=aggregate["paired"][key[run.name]])
        wd.run_dir(run.name).joinpath("metrics.json").write_text(json.dumps(
            {"run": run.name, "seed": seeds.get(run.name), "metrics": per_run}, indent=1,
            default=str))
    # base_score: the base agent's score with its 95% CI over reference groups (one run);
    # cost_of_building: construction's task-run cost, reported apart from evaluation (§4.4).
    return {
        "benchmark": cfg.data.benchmark, "agent": cfg.agent.kind, "selector": cfg.eval.selector,
        "runs": {run.name: str(wd.run_dir(run.name)) for run in runs},
        "seeds": list(aggregate["per_seed"]),
        "base": base,
        "base_score": intervals.summarize(
            np.array([[100.0 * e["solved"] for e in sorted(ends["base"],
                                                           key=lambda e: e["task_id"])]]),
            groups=metrics.task_groups(sorted(e["task_id"] for e in ends["base"]),
                                       dict(sp.groups))),
        "countermem": aggregate["mean"],
        "aggregate": aggregate,
        "paired": aggregate["paired"],
        "cost_of_building": metrics.building_cost(
            wd.log.events("task_end"),
            [e for e in wd.log.events("baseline_memory") if not e.get("task_id")]),
        "evaluation_cost": {_cost_label(r.name, key.get(r.name)): metrics.cost(ends[r.name])
                            for r in runs},
    }


def _cost_label(run: str, key: str | None) -> str:
    """The evaluation-cost row name of a run (base, a baseline's label, or a CounterMem seed)."""
    if run == "base":
        return "base"
    if not run.startswith("countermem"):
        return METHOD_LABELS.get(run, run)
    return "CounterMem, fixed selector" if key == "fixed" else f"CounterMem, seed {key}"
