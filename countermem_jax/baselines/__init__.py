"""Baseline rows of the paper's comparisons on the common agent interface (§4.1, D.5)."""
import asyncio
import dataclasses
import hashlib
import pathlib

import tqdm

from countermem_jax.method.agents import Augmentation
from countermem_jax.baselines import config as config_lib
from countermem_jax.baselines.best_of_n import BestOfNAugmentation
from countermem_jax.baselines.expel import ExpelBuilder
from countermem_jax.baselines.generative_agents import GenerativeAgentsBuilder
from countermem_jax.baselines.memgpt import MemgptBuilder
from countermem_jax.baselines.memory import (BaselineMemory, FrozenBaselineMemory,
                                             FrozenMemoryError, load_frozen_memory, load_memory,
                                             save_frozen, save_memory, thaw)
from countermem_jax.baselines.reasoningbank import (MattsBuilder, ReasoningBankBuilder,
                                                    VerifiedReasoningBankBuilder)
from countermem_jax.baselines.voyager import VoyagerBuilder
from evaluators.grouping import group_id


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """What one row of the comparison needs: which phases run, and who writes its memory.

    ``builder`` is the construction-time writer (its ``augmentation_cls`` reads the frozen memory
    at evaluation); ``about`` is the one-line description printed when a phase is skipped.
    """
    builder: type | None          # construction-time writer of the memory (None: no memory)
    needs_construction: bool
    needs_selector: bool
    about: str


# Table 1's rows (§4.1), plus ReasoningBank and its two controls from the accumulation,
# transfer and fixed-budget studies (§4.3, Appendix E.2).
METHODS = {
    "none": MethodSpec(None, False, False, "base agent, no augmentation"),
    "countermem": MethodSpec(None, True, True, "CounterMem (countermem_jax.phases: Modules I-III, DQN)"),
    "best_of_n": MethodSpec(None, False, False, "Best-of-N compute control, no memory"),
    "expel": MethodSpec(ExpelBuilder, True, False, "ExpeL insights + few-shot successes"),
    "generative_agents": MethodSpec(GenerativeAgentsBuilder, True, False,
                                    "Generative Agents memory stream with reflections"),
    "voyager": MethodSpec(VoyagerBuilder, True, False, "Voyager library of verified skills"),
    "memgpt": MethodSpec(MemgptBuilder, True, False, "MemGPT core + archival memory via tools"),
    "reasoningbank": MethodSpec(ReasoningBankBuilder, True, False, "ReasoningBank strategies"),
    "reasoningbank_matts": MethodSpec(MattsBuilder, True, False,
                                      "ReasoningBank + MaTTS parallel self-contrast"),
    "reasoningbank_verified": MethodSpec(VerifiedReasoningBankBuilder, True, False,
                                         "ReasoningBank with checked step outcomes"),
}


class UnknownMethod(ValueError):
    """The config names a method that does not exist."""


def spec(method: str) -> MethodSpec:
    """The ``MethodSpec`` of ``method``; ``UnknownMethod`` listing the valid names otherwise."""
    if method not in METHODS:
        raise UnknownMethod(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    return METHODS[method]


def needs_construction(method: str) -> bool:
    """Whether phase 1 (memory construction on T_build) runs for ``method``."""
    return spec(method).needs_construction


def needs_selector(method: str) -> bool:
    """Whether phase 2 (selector training) runs: only CounterMem has a learned selector; the
    baselines read their memory as their papers describe, with no trained gate (Appendix D.5).
    """
    return spec(method).needs_selector


def skip_message(method: str, phase: str) -> str:
    """The line a phase prints when ``method`` does not need it."""
    return f"{phase}: nothing to do for method {method!r} ({spec(method).about})"


@dataclasses.dataclass(frozen=True)
class MemoryPaths:
    """Where a baseline's memory lives in a workdir: the working file construction appends to
    after every task, and the frozen snapshot evaluation reads.
    """
    work: pathlib.Path      # the memory as construction leaves it after each task (resumable)
    frozen: pathlib.Path    # the frozen snapshot evaluation reads; hash in frozen + ".sha256"


def memory_paths(workdir, method: str) -> MemoryPaths:
    """``WORKDIR/baselines/<method>.jsonl`` and ``<method>_frozen.jsonl``."""
    root = pathlib.Path(workdir) / "baselines"
    return MemoryPaths(root / f"{method}.jsonl", root / f"{method}_frozen.jsonl")


def _memory_method(method: str) -> str:
    """``method`` itself, or ``UnknownMethod`` if it keeps no baseline memory."""
    if spec(method).builder is None:
        raise UnknownMethod(f"method {method!r} keeps no baseline memory")
    return method


async def abuild_baseline_memory(method: str, cfg, agent, construction_tasks, workdir,
                                 *, progress: bool = True) -> dict:
    """Phase 1 for a baseline: runs ``agent`` on the construction tasks with the mechanism's
    builder, saving the memory after every task (resumes from its processed task ids), then
    freezes it. Every LLM call is charged to the construction phase. Returns a summary."""
    if method == "countermem":
        raise UnknownMethod("countermem's memory is built by phases.build_memory")
    if not needs_construction(method):
        print(skip_message(method, "build_memory"))
        return {"method": method, "skipped": True}
    paths = memory_paths(workdir, _memory_method(method))
    settings = config_lib.section(cfg, method)
    if paths.frozen.exists():
        frozen = load_frozen_memory(paths.frozen, method)
        print(f"{method} memory already built and frozen: {len(frozen.items)} items, hash "
              f"{frozen.content_hash()[:16]} ({paths.frozen})")
        return {"method": method, "items": len(frozen.items), "hash": frozen.content_hash()}
    memory = load_memory(paths.work, method) if paths.work.exists() else \
        BaselineMemory(method, settings)
    # A resumed build must not mix items made under two configs.
    if memory.config != settings:
        raise FrozenMemoryError(f"{paths.work}: built with {memory.config}, the config now says "
                                f"{settings}; use a new workdir")
    builder = spec(method).builder(agent, memory, settings)
    # Builders that learn from the whole stream (ExpeL's insights) finish after this task.
    builder.final_task_id = construction_tasks[-1].task_id if construction_tasks else None
    # A construction task never retrieves what its reference twin wrote (baselines/common.py).
    builder.groups = {t.task_id: group_id(t) for t in construction_tasks}
    done = set(memory.meta.get("processed_tasks", []))
    todo = [t for t in construction_tasks if t.task_id not in done]
    if agent.runlog:
        agent.runlog.write("phase_start", phase="construction", method=method,
                           tasks=len(construction_tasks), resumed=len(done))
    bar = tqdm.tqdm(todo, desc=f"build {method}", unit="task", disable=not progress,
                    dynamic_ncols=True, mininterval=1.0)
    for task in bar:
        await builder.run_task(task, run=f"build-{method}")
        done.add(task.task_id)
        memory.meta["processed_tasks"] = sorted(done)
        save_memory(memory, paths.work)  # atomic: items and processed ids land together
        bar.set_postfix(items=len(memory.items))
    bar.close()
    await builder.finalize(lambda: save_memory(memory, paths.work))
    frozen = save_frozen(memory, paths.frozen)
    summary = {"method": method, "items": len(frozen.items), "hash": frozen.content_hash(),
               "tasks": len(construction_tasks),
               "tokens": agent.backbone.ledger.total("construction").total}
    if agent.runlog:
        agent.runlog.write("phase_end", phase="construction",
                           ledger=agent.backbone.ledger.summary(),
                           replies=agent.failures.summary(), **summary)
    print(f"built {method} memory: {len(frozen.items)} items from {len(construction_tasks)} "
          f"construction tasks; frozen {paths.frozen} (hash {frozen.content_hash()[:16]})")
    return summary


def build_baseline_memory(method: str, cfg, agent, construction_tasks, workdir,
                          *, progress: bool = True) -> dict:
    """Synchronous ``abuild_baseline_memory`` that also closes the backbone's connections."""
    async def run():
        try:
            return await abuild_baseline_memory(method, cfg, agent, construction_tasks, workdir,
                                                progress=progress)
        finally:
            await agent.backbone.aclose()
    return asyncio.run(run())


def make_baseline_augmentation(method: str, cfg, agent, workdir, groups=None) -> Augmentation:
    """Phase 3: the method's read-only augmentation over its frozen memory (hash checked);
    ``groups`` (the splits' task id -> reference group) keeps a task from its twins' items."""
    if method == "none":
        return Augmentation()
    if method == "best_of_n":
        return BestOfNAugmentation(agent, config_lib.section(cfg, method))
    if method == "countermem":
        raise UnknownMethod("countermem's augmentation is built by phases/evaluate.py")
    memory = load_frozen_memory(memory_paths(workdir, _memory_method(method)).frozen, method)
    if thaw(memory.config) != config_lib.section(cfg, method):
        raise FrozenMemoryError(f"the frozen {method} memory was built with {thaw(memory.config)}, "
                                f"the config now says {config_lib.section(cfg, method)}")
    return spec(method).builder.augmentation_cls(agent, memory, config_lib.section(cfg, method),
                                                 groups)


def memory_fingerprint(method: str, workdir) -> dict:
    """File sha256 and content hash of a method's frozen memory ({} without memory): compare the
    values before and after evaluation to prove evaluation changed nothing."""
    if spec(method).builder is None:
        return {}
    path = memory_paths(workdir, method).frozen
    return {"memory_file": hashlib.sha256(path.read_bytes()).hexdigest(),
            "memory_hash": load_frozen_memory(path, method).content_hash()}


__all__ = ["METHODS", "MethodSpec", "UnknownMethod", "needs_construction", "needs_selector",
           "skip_message", "memory_paths", "build_baseline_memory", "abuild_baseline_memory",
           "make_baseline_augmentation", "memory_fingerprint",
           "BaselineMemory", "FrozenBaselineMemory", "FrozenMemoryError"]
