"""The three phases of Algorithm 1 (paper Appendix C.3), as library calls the binaries wrap.

  build_memory    Modules I–II on the construction split; the store is saved after every task
                  (atomically, with the processed task ids in its header) and frozen at the end.
  train_selector  DQN on the training split over the frozen store; validation episodes at every
                  checkpoint; transitions saved for offline retraining of the other seeds.
  evaluate        the held-out split, once without memory and once with CounterMem; store and
                  selector are verified before and proven unchanged after; metrics and a table.
Every phase appends to ``WORKDIR/log.jsonl`` and resumes from it after a kill.
"""
import asyncio
import hashlib
import json
import logging
import pathlib

import ml_collections
import numpy as np
import tqdm

from countermem_jax import domains, metrics, splits as splits_lib
from countermem_jax.agents import Agent, AgentConfig, Augmentation
from countermem_jax.backbones import prompts
from countermem_jax.backbones.base import TokenLedger
from countermem_jax.backbones.factory import make_backbone
from countermem_jax.counterfactual import ConstructionConfig, CounterfactualBuilder
from countermem_jax.memory import load_frozen, load_store, save_store, scoring
from countermem_jax.memory.store import MemoryStore, StoreConfig
from countermem_jax.memory_use import CounterMemAugmentation
from countermem_jax.retrieval.conditions import (CompositeChecker, JudgeSettings, LLMJudgeChecker,
                                                 RuleChecker)
from countermem_jax.retrieval.retrieve import RetrievalIndex
from countermem_jax.runlog import RunLog
from countermem_jax.selector import checkpoint, dqn, policies, training

log = logging.getLogger(__name__)


class PhaseError(RuntimeError):
    """A phase cannot run: missing inputs, overlapping splits, or a changed artefact."""


# ----------------------------------------------------------------------------- shared setup
class Workdir:
    def __init__(self, path):
        self.root = pathlib.Path(path)
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = self.root / "store.jsonl"
        self.frozen = self.root / "store_frozen.jsonl"
        self.frozen_hash = self.root / "store_frozen.sha256"
        self.selector = self.root / "selector"
        self.splits = self.root / "splits.json"
        self.log = RunLog(self.root / "log.jsonl")
        self.metrics = self.root / "metrics.json"
        self.cache = self.root / "llm_cache"


def _setup(cfg, workdir: Workdir, backbone=None, benchmark=None):
    """Loads tasks, splits and the backbone; ``backbone`` / ``benchmark`` (tasks, evaluator,
    domain) may be injected, which is how the pipeline tests run on a scripted backbone."""
    tasks, evaluator, domain = benchmark or domains.load_benchmark(cfg.data)
    grouped = cfg.splits.get("group_by_reference", True)
    if cfg.splits.get("manifest"):
        manifest_file = pathlib.Path(cfg.splits.manifest)
        sp = splits_lib.from_manifest(tasks, json.loads(manifest_file.read_text()), grouped)
    else:
        sp = splits_lib.make_splits(tasks, cfg.splits.n_build, cfg.splits.n_train,
                                    cfg.splits.n_validation, cfg.splits.n_eval,
                                    cfg.splits.separate_environments,
                                    cfg.splits.get("n_build_envs", 0),
                                    cfg.splits.get("n_eval_envs", 0), grouped)
    manifest = sp.manifest()
    if workdir.splits.exists():
        previous = json.loads(workdir.splits.read_text())
        if not splits_lib.same_assignment(previous, manifest):
            raise PhaseError(f"{workdir.splits}: the task splits differ from the ones this workdir "
                             "was built with (config changed?); use a new --workdir")
    else:
        workdir.splits.write_text(json.dumps(manifest, indent=1))
    prompts.FAILURES.path = str(workdir.root / "parse_failures.jsonl")  # every contract violation
    if backbone is None:
        ledger = TokenLedger()
        backbone_cfg = cfg.backbone
        if backbone_cfg.get("cache_dir") == "auto":  # a response cache inside the workdir
            backbone_cfg = ml_collections.ConfigDict(backbone_cfg.to_dict())
            backbone_cfg.cache_dir = str(workdir.cache)
        backbone = make_backbone(backbone_cfg, ledger)
    ledger = backbone.ledger
    agent_cfg = AgentConfig(**cfg.agent.to_dict())
    return sp, evaluator, domain, backbone, ledger, agent_cfg


def _checker(cfg, backbone, phase: str) -> CompositeChecker:
    """Rule conditions first; free-text conditions judged by the backbone with the judge's own
    sampling settings, asynchronously by the deciding decision (``memory_use``), charged to it."""
    del backbone, phase  # the judge's calls go through the deciding agent's backbone and charge
    return CompositeChecker([RuleChecker(cfg.memory.fallback_condition),
                             LLMJudgeChecker(JudgeSettings(**cfg.memory.judge.to_dict()))],
                            cfg.memory.unknown_condition)


def _index(cfg, records, checker) -> RetrievalIndex:
    return RetrievalIndex(records, top_k=cfg.memory.top_k, reuse_weight=cfg.memory.reuse_weight,
                          checker=checker, use_conditions=cfg.memory.use_conditions)


def _dqn_cfg(cfg) -> dqn.DQNConfig:
    s = cfg.selector
    return dqn.DQNConfig(total_decisions=s.total_decisions, learning_starts=s.learning_starts,
                         train_every=s.train_every, target_sync_every=s.target_sync_every,
                         checkpoint_every=s.checkpoint_every, batch_size=s.batch_size)


def _progress(iterable, desc):
    return tqdm.tqdm(iterable, desc=desc, unit="task", dynamic_ncols=True, mininterval=1.0)


def _store_config(cfg) -> StoreConfig:
    m = cfg.memory
    return StoreConfig(capacity=m.capacity, retention=m.retention, seed=m.seed,
                       admission=scoring.AdmissionConfig(epsilon=cfg.construction.epsilon))


# ----------------------------------------------------------------------------- phase 1
def build_memory(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    wd = Workdir(workdir_path)
    sp, evaluator, domain, backbone, ledger, agent_cfg = _setup(cfg, wd, backbone, benchmark)
    if wd.frozen.exists():
        frozen = load_frozen(wd.frozen)
        print(f"memory already built and frozen: {len(frozen)} records, hash "
              f"{frozen.content_hash()[:16]} ({wd.frozen})")
        return {"records": len(frozen), "hash": frozen.content_hash()}
    store = load_store(wd.store) if wd.store.exists() else MemoryStore(_store_config(cfg))
    done = set(store.meta.get("processed_tasks", []))
    agent = Agent(backbone, evaluator, domain, agent_cfg, wd.log)
    builder = CounterfactualBuilder(agent, store, ConstructionConfig(
        k=cfg.construction.k, max_expanded_failures=cfg.construction.max_expanded_failures,
        verification_budget=cfg.construction.verification_budget,
        epsilon=cfg.construction.epsilon,
        scope_free_text_conditions=cfg.construction.scope_free_text_conditions), wd.log)
    checker = _checker(cfg, backbone, "construction")
    cache = {}

    def index_factory():
        key = store.content_hash()
        if key not in cache:
            cache.clear()
            cache[key] = _index(cfg, store.records, checker)
        return cache[key]

    augmentation = CounterMemAugmentation(
        agent, phase="construction", store=store, builder=builder, index_factory=index_factory,
        selector=policies.make_fixed(cfg.construction.reuse_policy,
                                     cfg.construction.relevance_threshold),
        render_condition=cfg.memory.render_condition)
    todo = [t for t in sp.build if t.task_id not in done]
    wd.log.write("phase_start", phase="construction", tasks=len(sp.build), resumed=len(done))

    async def run_all():
        solved = 0
        bar = _progress(todo, "build memory")
        for task in bar:
            ctx = await agent.run(task, augmentation, phase="construction", run="build")
            solved += ctx.solved
            store.meta["processed_tasks"] = sorted(done | {task.task_id})
            done.add(task.task_id)
            save_store(store, wd.store)  # atomic: records and processed ids land together
            bar.set_postfix(records=len(store), solved=solved,
                            tokens=ledger.total("construction").total)
        await backbone.aclose()
    asyncio.run(run_all())
    frozen = store.freeze()
    save_store(frozen, wd.frozen)
    wd.frozen_hash.write_text(frozen.content_hash() + "\n")
    summary = {"records": len(frozen), "hash": frozen.content_hash(), "tasks": len(sp.build),
               "tokens": ledger.total("construction").total}
    wd.log.write("phase_end", phase="construction", **summary)
    print(f"built {len(frozen)} records from {len(sp.build)} construction tasks; frozen store "
          f"{wd.frozen} (hash {frozen.content_hash()[:16]})")
    return summary


def _load_frozen_checked(wd: Workdir):
    if not wd.frozen.exists() or not wd.frozen_hash.exists():
        raise PhaseError(f"{wd.frozen}: no frozen store; run build_memory first")
    return load_frozen(wd.frozen, expected_hash=wd.frozen_hash.read_text().strip())


# ----------------------------------------------------------------------------- phase 2
def train_selector(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    wd = Workdir(workdir_path)
    sp, evaluator, domain, backbone, ledger, agent_cfg = _setup(cfg, wd, backbone, benchmark)
    frozen = _load_frozen_checked(wd)
    if not sp.train:
        raise PhaseError("no selector-training tasks (splits.n_train = 0)")
    dcfg = _dqn_cfg(cfg)
    seeds = tuple(cfg.selector.seeds)
    index = _index(cfg, frozen.records, _checker(cfg, backbone, "selector_training"))
    agent = Agent(backbone, evaluator, domain, agent_cfg, wd.log)
    online_seed = seeds[0]
    ckpt = checkpoint.SelectorCheckpointer(wd.selector / f"seed_{online_seed}", dcfg, online_seed)
    transitions: list = []
    validation_runs = {"n": 0}

    async def validate(params) -> float:
        greedy = policies.GreedyDQN(dcfg, params)
        aug = CounterMemAugmentation(agent, phase="selector_training", index=index,
                                     selector=greedy, dqn_cfg=dcfg,
                                     render_condition=cfg.memory.render_condition)
        validation_runs["n"] += 1
        for task in sp.validation:
            await agent.run(task, aug, phase="selector_training",
                            run=f"validation{validation_runs['n']}")
        returns = list(aug.episode_returns.values())
        return float(np.mean(returns)) if returns else 0.0

    pending_checkpoints = []
    learner = training.OnlineLearner(dcfg, online_seed,
                                     on_checkpoint=lambda d, p: pending_checkpoints.append((d, p)))
    # Resume: replay the logged transitions of finished episodes into a fresh learner.
    replayed = wd.log.events("transition")
    for t in replayed:
        learner.observe(np.asarray(t["obs"], np.float32), t["action"], t["reward"],
                        np.asarray(t["next_obs"], np.float32), np.asarray(t["next_mask"], bool),
                        bool(t["done"]))
        transitions.append((np.asarray(t["obs"], np.float32), t["action"], t["reward"],
                            np.asarray(t["next_obs"], np.float32), np.asarray(t["next_mask"], bool),
                            float(t["done"]), np.asarray(t["mask"], bool), t["task_id"]))
    pending_checkpoints.clear()  # their checkpoints were saved by the earlier run
    episode = len({t["episode"] for t in replayed})
    wd.log.write("phase_start", phase="selector_training", decisions_done=learner.decisions)

    async def run_all():
        nonlocal episode
        bar = tqdm.tqdm(total=dcfg.total_decisions, initial=learner.decisions, desc="train selector",
                        unit="decision", dynamic_ncols=True, mininterval=1.0)
        while not learner.done:
            task = sp.train[episode % len(sp.train)]
            episode_transitions: list = []
            aug = CounterMemAugmentation(agent, phase="selector_training", index=index,
                                         learner=learner, dqn_cfg=dcfg,
                                         transitions=episode_transitions,
                                         render_condition=cfg.memory.render_condition)
            before = learner.decisions
            await agent.run(task, aug, phase="selector_training", run=f"train{episode}")
            for (obs, action, reward, next_obs, next_mask, done, mask, tid) in episode_transitions:
                wd.log.write("transition", episode=episode, task_id=tid, obs=obs, action=action,
                             reward=reward, next_obs=next_obs, next_mask=next_mask, done=done,
                             mask=mask)
            transitions.extend(episode_transitions)
            for decisions, params in pending_checkpoints:
                ckpt.save(decisions, params, await validate(params))
            pending_checkpoints.clear()
            bar.update(learner.decisions - before)
            bar.set_postfix(episode=episode, tokens=ledger.total("selector_training").total)
            episode += 1
        bar.close()
        # The last partial interval gets a checkpoint too (not again when a finished run resumes).
        if learner.decisions % dcfg.checkpoint_every and learner.decisions not in ckpt.steps():
            ckpt.save(learner.decisions, learner.state.params, await validate(learner.state.params))
        await backbone.aclose()
    asyncio.run(run_all())
    best = ckpt.best_step()
    ckpt.close()
    log_path = wd.selector / "transitions.npz"
    _save_transitions(transitions, sp, log_path)
    others = [s for s in seeds[1:]]
    if others and cfg.selector.offline_other_seeds and transitions:
        training.train_offline(dcfg, training.load_log(log_path), seeds=others,
                               checkpoint_dir=wd.selector)
    # Record what evaluation must find: each seed's best checkpoint and its file fingerprint.
    prints = {}
    for seed in seeds:
        best_file = wd.selector / f"seed_{seed}" / "best.json"
        if best_file.exists():
            step = json.loads(best_file.read_text())["best_step"]
            prints[str(seed)] = {"step": step,
                                 "fingerprint": _fingerprint(best_file.parent / str(step))}
    (wd.selector / "fingerprints.json").write_text(json.dumps(prints, indent=1))
    summary = {"decisions": learner.decisions, "episodes": episode, "best_step": best,
               "tokens": ledger.total("selector_training").total, "seeds": list(seeds)}
    wd.log.write("phase_end", phase="selector_training", **summary)
    print(f"trained the selector for {learner.decisions} decisions over {episode} episodes; best "
          f"checkpoint at {best} decisions ({wd.selector / f'seed_{online_seed}'})")
    return summary


def _save_transitions(transitions, sp, path):
    if not transitions:
        return
    val_ids = {t.task_id for t in sp.validation}
    obs, action, reward, next_obs, next_mask, done, mask, tids = zip(*transitions)
    episode, current, last = [], -1, None
    for d, tid in zip(done, tids):
        if last is None or last:
            current += 1
        episode.append(current)
        last = d
    training.save_log(training.TransitionLog(
        obs=np.stack(obs), action=np.asarray(action, np.int32),
        reward=np.asarray(reward, np.float32), next_obs=np.stack(next_obs),
        next_mask=np.stack(next_mask), done=np.asarray(done, np.float32), mask=np.stack(mask),
        episode=np.asarray(episode, np.int64),
        split=np.array(["validation" if t in val_ids else "train" for t in tids])), path)


# ----------------------------------------------------------------------------- phase 3
def _fingerprint(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        digest.update(str(f.relative_to(path.parent)).encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()


def _make_selector(cfg, wd: Workdir):
    name = cfg.eval.selector
    if name != "dqn":
        return policies.make_fixed(name, cfg.eval.relevance_threshold), None
    directory = wd.selector / f"seed_{cfg.eval.selector_seed}"
    params, meta = checkpoint.restore(directory, "best")
    step_dir = directory / str(meta["decisions"])
    recorded = wd.selector / "fingerprints.json"
    if recorded.exists():
        expected = json.loads(recorded.read_text()).get(str(cfg.eval.selector_seed))
        if expected and (expected["step"] != meta["decisions"] or
                         expected["fingerprint"] != _fingerprint(step_dir)):
            raise PhaseError(f"{step_dir}: the selector checkpoint is not the one training "
                             "recorded as best (modified or replaced)")
    return policies.GreedyDQN(dqn.DQNConfig.from_json(meta["config"]), params), step_dir


def evaluate(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    wd = Workdir(workdir_path)
    sp, evaluator, domain, backbone, ledger, agent_cfg = _setup(cfg, wd, backbone, benchmark)
    frozen = _load_frozen_checked(wd)
    selector, ckpt_dir = _make_selector(cfg, wd)
    before = {"store_file": _fingerprint(wd.frozen), "store_hash": frozen.content_hash()}
    if ckpt_dir is not None:
        before["selector_checkpoint"] = _fingerprint(ckpt_dir)
    index = _index(cfg, frozen.records, _checker(cfg, backbone, "evaluation"))
    agent = Agent(backbone, evaluator, domain, agent_cfg, wd.log)
    # Each selector has its own run (and metrics file), so comparing selectors in one workdir
    # never mixes their logged tasks; the memory-free "base" run is shared.
    mem_run = "countermem" if cfg.eval.selector == "dqn" else f"countermem-{selector.name}"
    runs = {"base": Augmentation(),
            mem_run: CounterMemAugmentation(agent, phase="evaluation", index=index,
                                            selector=selector,
                                            render_condition=cfg.memory.render_condition)}
    wd.log.write("phase_start", phase="evaluation", verified=before)

    async def run_all():
        for run, aug in runs.items():
            done = wd.log.finished(run)
            todo = [t for t in sp.eval if t.task_id not in done]
            semaphore = asyncio.Semaphore(max(1, cfg.eval.concurrency))
            bar = tqdm.tqdm(total=len(todo), desc=f"evaluate {run}", unit="task",
                            dynamic_ncols=True, mininterval=1.0)

            async def one(task):
                async with semaphore:
                    return await agent.run(task, aug, phase="evaluation", run=run)
            for fut in asyncio.as_completed([one(t) for t in todo]):
                await fut
                bar.update(1)
                bar.set_postfix(tokens=ledger.total("evaluation").total)
            bar.close()
        await backbone.aclose()
    asyncio.run(run_all())
    after = {"store_file": _fingerprint(wd.frozen), "store_hash": frozen.content_hash()}
    if ckpt_dir is not None:
        after["selector_checkpoint"] = _fingerprint(ckpt_dir)
    if after != before:
        raise PhaseError(f"frozen artefacts changed during evaluation: {before} -> {after}")
    eval_ids = {t.task_id for t in sp.eval}
    ends = {run: list({e["task_id"]: e for e in wd.log.events("task_end")
                       if e["run"] == run and e["task_id"] in eval_ids}.values()) for run in runs}
    decisions = {run: [e for e in wd.log.completed_decisions(run) if e["task_id"] in eval_ids]
                 for run in runs}
    result = {"base": metrics.run_metrics(ends["base"], decisions["base"]),
              "countermem": metrics.run_metrics(ends[mem_run], decisions[mem_run]),
              "countermem_run": mem_run,
              "paired": metrics.paired(ends["base"], ends[mem_run])}
    result["verified_unchanged"] = after
    result["agent"] = cfg.agent.kind
    result["selector"] = cfg.eval.selector
    result["benchmark"] = cfg.data.benchmark
    metrics_path = wd.metrics if mem_run == "countermem" else \
        wd.root / f"metrics_{selector.name}.json"
    metrics_path.write_text(json.dumps(result, indent=1, default=str))
    agent_name = "ReAct" if cfg.agent.kind == "react" else "Reflexion"
    table = metrics.comparison_table(result["base"], result["countermem"], result["paired"],
                                     agent_name)
    print(f"\n{cfg.data.benchmark}: {len(sp.eval)} held-out tasks, store {frozen.content_hash()[:12]} "
          f"({len(frozen)} records), selector {cfg.eval.selector}\n{table}\n"
          f"store and selector verified unchanged; metrics in {metrics_path}")
    wd.log.write("phase_end", phase="evaluation", metrics=result)
    return result
