"""The three phases of Algorithm 1 (paper Appendix C.3), as library calls the binaries wrap.

  build_memory    Modules I–II on the construction split; the store is saved after every task
                  (atomically, with the processed task ids in its header) and frozen at the end.
  train_selector  DQN on the training split over the frozen store, one real run per selector seed
                  (own initial parameters and exploration key, validation episodes at every
                  checkpoint, best checkpoint by mean validation return; Appendix C.2).
  evaluate        the held-out split, once without memory and once with CounterMem per selector
                  seed, each run in its own directory; store and selectors are verified before
                  and proven unchanged after; per-seed metrics, their mean, std and 95% bootstrap
                  CI, and the cost of building.
Construction and selector training append to ``WORKDIR/log.jsonl`` and evaluation runs to
``WORKDIR/eval/<run>/log.jsonl``; every phase resumes from them after a kill.
"""
import asyncio
import functools
import hashlib
import json
import logging
import pathlib

import ml_collections
import numpy as np
import tqdm

from countermem_jax import baselines, config_validation, domains, intervals, metrics
from countermem_jax import workdir_guard
from countermem_jax import splits as splits_lib
from countermem_jax.agents import Agent, AgentConfig, Augmentation
from countermem_jax.backbones import prompts
from countermem_jax.backbones.base import TokenLedger
from countermem_jax.backbones.factory import make_backbone
from countermem_jax.counterfactual import (ConstructionConfig, CounterfactualBuilder,
                                           WithinTaskChecks)
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
    """The files of one experiment; evaluation runs get their own directories under ``eval/``."""

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
        self.eval_runs = self.root / "eval"

    def seed_dir(self, seed: int) -> pathlib.Path:
        """Selector seed ``seed``'s Orbax checkpoints and best.json."""
        return self.selector / f"seed_{seed}"

    def run_dir(self, run: str) -> pathlib.Path:
        """An evaluation run's own directory (its log.jsonl and metrics.json)."""
        path = self.eval_runs / run
        path.mkdir(parents=True, exist_ok=True)
        return path

    def run_log(self, run: str) -> RunLog:
        return RunLog(self.run_dir(run) / "log.jsonl")


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
        config_validation.check_split_sizes(cfg, sp, len(tasks))  # before the backbone
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


def _index(cfg, records, checker, evaluation: bool = False) -> RetrievalIndex:
    """The retrieval index; at ``evaluation`` with the eval-only interventions of the studies
    (``eval.retrieval_intervention``, ``eval.remove_conditions``) on the same store."""
    interventions = {}
    if evaluation:
        interventions = dict(intervention=cfg.eval.retrieval_intervention,
                             intervention_seed=cfg.eval.intervention_seed)
    return RetrievalIndex(records, top_k=cfg.memory.top_k, reuse_weight=cfg.memory.reuse_weight,
                          checker=checker, use_conditions=cfg.memory.use_conditions and not (
                              evaluation and cfg.eval.remove_conditions), **interventions)


def _dqn_cfg(cfg) -> dqn.DQNConfig:
    s = cfg.selector
    return dqn.DQNConfig(total_decisions=s.total_decisions, learning_starts=s.learning_starts,
                         train_every=s.train_every, target_sync_every=s.target_sync_every,
                         checkpoint_every=s.checkpoint_every, batch_size=s.batch_size)


def _progress(iterable, desc):
    return tqdm.tqdm(iterable, desc=desc, unit="task", dynamic_ncols=True, mininterval=1.0)


def _construction_config(cfg) -> ConstructionConfig:
    c = cfg.construction
    return ConstructionConfig(k=c.k, max_expanded_failures=c.max_expanded_failures,
                              verification_budget=c.verification_budget, epsilon=c.epsilon,
                              scope_free_text_conditions=c.scope_free_text_conditions,
                              corrections=c.corrections)


def _store_config(cfg) -> StoreConfig:
    m = cfg.memory
    return StoreConfig(capacity=m.capacity, retention=m.retention, seed=m.seed,
                       admission=scoring.AdmissionConfig(epsilon=cfg.construction.epsilon))


# ----------------------------------------------------------------------------- phase 1
@workdir_guard.guarded_phase("build_memory")  # config checked, phase locked, fingerprint
def build_memory(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    """Phase 1 on the construction split: CounterMem's Modules I–II (§3.2–3.3), or the memory of
    the baseline named by ``cfg.method`` (``countermem_jax.baselines``; a no-op for methods
    without memory). Resumable after a kill; the store is frozen at the end."""
    method = cfg.get("method", "countermem")
    if method != "countermem" and not baselines.needs_construction(method):
        print(baselines.skip_message(method, "build_memory"))
        return {"method": method, "skipped": True}
    wd = Workdir(workdir_path)
    sp, evaluator, domain, backbone, ledger, agent_cfg = _setup(cfg, wd, backbone, benchmark)
    if method != "countermem":
        agent = Agent(backbone, evaluator, domain, agent_cfg, wd.log)
        return baselines.build_baseline_memory(method, cfg, agent, sp.build, wd.root)
    if wd.frozen.exists():
        frozen = load_frozen(wd.frozen)
        print(f"memory already built and frozen: {len(frozen)} records, hash "
              f"{frozen.content_hash()[:16]} ({wd.frozen})")
        return {"records": len(frozen), "hash": frozen.content_hash()}
    store = load_store(wd.store) if wd.store.exists() else MemoryStore(_store_config(cfg))
    done = set(store.meta.get("processed_tasks", []))
    agent = Agent(backbone, evaluator, domain, agent_cfg, wd.log)
    builder = CounterfactualBuilder(agent, store, _construction_config(cfg), wd.log)
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
    wd.log.write("phase_end", phase="construction", ledger=ledger.summary(), **summary)
    print(f"built {len(frozen)} records from {len(sp.build)} construction tasks; frozen store "
          f"{wd.frozen} (hash {frozen.content_hash()[:16]})")
    return summary


def _load_frozen_checked(wd: Workdir):
    if not wd.frozen.exists() or not wd.frozen_hash.exists():
        raise PhaseError(f"{wd.frozen}: no frozen store; run build_memory first")
    return load_frozen(wd.frozen, expected_hash=wd.frozen_hash.read_text().strip())


# ----------------------------------------------------------------------------- phase 2
@workdir_guard.guarded_phase("train_selector")  # config checked, phase locked, fingerprint
def train_selector(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    """Trains one selector per seed in ``selector.seeds``, each a real run (Appendix C.2); a
    no-op that says so for a baseline method (it has no selector)."""
    method = cfg.get("method", "countermem")
    if not baselines.needs_selector(method):
        print(baselines.skip_message(method, "train_selector"))
        return {"method": method, "skipped": True}
    seeds = tuple(int(s) for s in cfg.selector.seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise PhaseError(f"selector.seeds={seeds}: give one or more distinct seeds")
    wd = Workdir(workdir_path)
    sp, evaluator, domain, backbone, ledger, agent_cfg = _setup(cfg, wd, backbone, benchmark)
    frozen = _load_frozen_checked(wd)
    if not sp.train:
        raise PhaseError("no selector-training tasks (splits.n_train = 0)")
    if not sp.validation:
        raise PhaseError("no selector-validation tasks (splits.n_validation = 0): every seed "
                         "keeps the checkpoint with the highest mean validation return")
    dcfg = _dqn_cfg(cfg)
    index = _index(cfg, frozen.records, _checker(cfg, backbone, "selector_training"))
    agent = Agent(backbone, evaluator, domain, agent_cfg, wd.log)
    wd.log.write("phase_start", phase="selector_training", seeds=list(seeds))
    per_seed = {}

    async def run_all():
        try:
            for seed in seeds:
                run = _SeedRun(cfg, dcfg, wd, sp, agent, index, seed)
                per_seed[seed] = await run.train(ledger)
        finally:
            await backbone.aclose()
    asyncio.run(run_all())
    # Record what evaluation must find: each seed's best checkpoint and its file fingerprint.
    prints = {str(s): {"step": r["best_step"],
                       "fingerprint": _fingerprint(wd.seed_dir(s) / str(r["best_step"]))}
              for s, r in per_seed.items()}
    (wd.selector / "fingerprints.json").write_text(json.dumps(prints, indent=1))
    summary = {"seeds": {str(s): r for s, r in per_seed.items()},
               "tokens": ledger.total("selector_training").total}
    wd.log.write("phase_end", phase="selector_training", ledger=ledger.summary(), **summary)
    for s, r in per_seed.items():
        print(f"selector seed {s}: {r['decisions']} decisions over {r['episodes']} episodes; best "
              f"checkpoint at {r['best_step']} decisions, mean validation return "
              f"{r['best_val_return']:.4f} ({wd.seed_dir(s)})")
    return summary


class _SeedRun:
    """One selector seed's own training run: ε-greedy episodes on the training split with the
    seed's own initial parameters and exploration key, greedy validation episodes at every
    checkpoint, the checkpoint with the highest mean validation return kept (Appendix C.2).

    Resumes from the log after a kill: the seed's logged transitions are replayed through the
    learner (``training.replay``, bit-identical to the uninterrupted run) and checkpoints whose
    validation did not finish are validated again. The LLM response cache makes the repeated
    drafts of later seeds (and of resumed episodes) cost no new calls.
    """

    def __init__(self, cfg, dcfg, wd: Workdir, sp, agent: Agent, index, seed: int):
        self.cfg, self.dcfg, self.wd, self.sp = cfg, dcfg, wd, sp
        self.agent, self.index = agent, index
        self.seed = seed
        self.ckpt = checkpoint.SelectorCheckpointer(wd.seed_dir(seed), dcfg, seed)
        self.pending: list = []
        self.learner = training.OnlineLearner(
            dcfg, seed, on_checkpoint=lambda d, p: self.pending.append((d, p)))
        self.episode = 0

    def _augmentation(self, rows: list, **selector) -> CounterMemAugmentation:
        return CounterMemAugmentation(self.agent, phase="selector_training", index=self.index,
                                      dqn_cfg=self.dcfg, transitions=rows,
                                      render_condition=self.cfg.memory.render_condition,
                                      **selector)

    def _events(self, event: str) -> list[dict]:
        return [e for e in self.wd.log.events(event) if e.get("seed", 0) == self.seed]

    async def validate(self, decisions: int, params) -> float:
        """Mean return of the greedy policy over the real validation episodes."""
        rows: list = []
        aug = self._augmentation(rows, selector=policies.GreedyDQN(self.dcfg, params))
        run = f"{metrics.VALIDATION}/seed{self.seed}@{decisions}"
        for task in self.sp.validation:
            await self.agent.run(task, aug, phase="selector_training", run=run,
                                 extra={"seed": self.seed})
        returns = [aug.episode_returns.get(t.task_id, float("nan")) for t in self.sp.validation]
        value = float(np.mean(returns))
        if not np.isfinite(value):
            raise PhaseError(f"selector seed {self.seed}, checkpoint {decisions}: validation "
                             f"returns {returns} are not finite")
        self.wd.log.write("validation_transitions", seed=self.seed, checkpoint=decisions,
                          rows=[_transition_fields(row) for row in rows])
        return value

    async def _save_pending(self) -> None:
        # transitions are not fsynced one by one (runlog.UNSYNCED_EVENTS): make the ones this
        # checkpoint counts durable before it is written
        self.wd.log.sync()
        done = set(self.ckpt.steps())
        for decisions, params in self.pending:
            if decisions not in done:
                self.ckpt.save(decisions, params, await self.validate(decisions, params))
        self.pending.clear()

    async def train(self, ledger) -> dict:
        replayed = self._events("transition")
        training.replay(self.learner, [_transition_tuple(t) for t in replayed])
        self.episode = len({t["episode"] for t in replayed})
        self.wd.log.write("seed_start", phase="selector_training", seed=self.seed,
                          decisions_done=self.learner.decisions, episodes_done=self.episode)
        await self._save_pending()  # checkpoints reached before a kill but never validated
        bar = tqdm.tqdm(total=self.dcfg.total_decisions, initial=self.learner.decisions,
                        desc=f"train selector seed {self.seed}", unit="decision",
                        dynamic_ncols=True, mininterval=1.0)
        while not self.learner.done:
            task = self.sp.train[self.episode % len(self.sp.train)]
            rows: list = []
            before = self.learner.decisions
            await self.agent.run(task, self._augmentation(rows, learner=self.learner),
                                 phase="selector_training",
                                 run=f"train/seed{self.seed}/episode{self.episode}",
                                 extra={"seed": self.seed})
            for row in rows:
                self.wd.log.write("transition", seed=self.seed, episode=self.episode,
                                  **_transition_fields(row))
            await self._save_pending()
            bar.update(self.learner.decisions - before)
            bar.set_postfix(episode=self.episode,
                            tokens=ledger.total("selector_training").total)
            self.episode += 1
        bar.close()
        if self.learner.decisions not in self.ckpt.steps():  # the last partial interval
            params = self.learner.state.params
            self.ckpt.save(self.learner.decisions, params,
                           await self.validate(self.learner.decisions, params))
        best, returns = self.ckpt.best_step(), self.ckpt.val_returns()
        self.ckpt.close()
        self._save_log()
        return {"decisions": self.learner.decisions, "episodes": self.episode, "best_step": best,
                "best_val_return": returns[best], "val_returns": returns}

    def _save_log(self) -> None:
        """The seed's transitions (training rows, and the validation rows of its checkpoints)
        as a transition log for offline analysis (``training.train_offline``)."""
        train = [_transition_tuple(t) for t in self._events("transition")]
        latest = {e["checkpoint"]: e["rows"] for e in self._events("validation_transitions")}
        val = [_transition_tuple(r) for rows in latest.values() for r in rows]
        if train:
            training.save_log(training.log_from_rows(train, val),
                              self.wd.selector / f"transitions_seed{self.seed}.npz")


def _transition_fields(row) -> dict:
    obs, action, reward, next_obs, next_mask, done, mask, task_id = row
    return {"task_id": task_id, "obs": obs, "action": action, "reward": reward,
            "next_obs": next_obs, "next_mask": next_mask, "done": done, "mask": mask}


def _transition_tuple(e: dict) -> tuple:
    return (np.asarray(e["obs"], np.float32), int(e["action"]), float(e["reward"]),
            np.asarray(e["next_obs"], np.float32), np.asarray(e["next_mask"], bool),
            float(e["done"]), np.asarray(e["mask"], bool), e["task_id"])


# ----------------------------------------------------------------------------- phase 3
def _fingerprint(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        digest.update(str(f.relative_to(path.parent)).encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()


def _restore_seed(wd: Workdir, seed: int):
    """The seed's best checkpoint, refused if it is not the one training recorded."""
    directory = wd.seed_dir(seed)
    if not directory.exists():
        raise PhaseError(f"{directory}: no checkpoint for selector seed {seed}; run "
                         "train_selector with this seed in selector.seeds")
    params, meta = checkpoint.restore(directory, "best")
    step_dir = directory / str(meta["decisions"])
    recorded = wd.selector / "fingerprints.json"
    if recorded.exists():
        try:
            expected = json.loads(recorded.read_text()).get(str(seed))
        except (ValueError, AttributeError) as err:
            raise PhaseError(f"{recorded}: unreadable checkpoint fingerprints ({err})") from None
        if expected and (expected["step"] != meta["decisions"] or
                         expected["fingerprint"] != _fingerprint(step_dir)):
            raise PhaseError(f"{step_dir}: the selector checkpoint is not the one training "
                             "recorded as best (modified or replaced)")
    return policies.GreedyDQN(dqn.DQNConfig.from_json(meta["config"]), params), step_dir


def _memory_runs(cfg, wd: Workdir) -> list[tuple]:
    """(run name, seed, selector, checkpoint dir) per CounterMem evaluation run: one per DQN
    seed, or one for a fixed selector (it has no seed)."""
    name = cfg.eval.selector
    if name != "dqn":
        selector = policies.make_fixed(name, cfg.eval.relevance_threshold)
        return [(f"countermem-{selector.name}", None, selector, None)]
    seeds = tuple(int(s) for s in (cfg.eval.seeds or cfg.selector.seeds))
    return [(f"countermem-dqn-seed{s}", s, *_restore_seed(wd, s)) for s in seeds]


def _artefacts(wd: Workdir, frozen, runs) -> dict:
    out = {"store_file": _fingerprint(wd.frozen), "store_hash": frozen.content_hash()}
    for _, seed, _, ckpt_dir in runs:
        if ckpt_dir is not None:
            out[f"selector_checkpoint_seed{seed}"] = _fingerprint(ckpt_dir)
    return out


def _run_ends(run_log: RunLog, run: str, eval_ids: set) -> tuple[list, list]:
    ends = list({e["task_id"]: e for e in run_log.events("task_end")
                 if e["run"] == run and e["task_id"] in eval_ids}.values())
    decisions = [e for e in run_log.completed_decisions(run) if e["task_id"] in eval_ids]
    return ends, decisions


@workdir_guard.guarded_phase("evaluate")  # config checked, phase locked, fingerprint
def evaluate(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    """The base agent once and one CounterMem run per selector seed, each in its own run
    directory ``WORKDIR/eval/<run>/`` (log.jsonl, metrics.json); the aggregate over seeds, with
    95% bootstrap CIs and the cost of building, in ``WORKDIR/metrics.json``."""
    method = cfg.get("method", "countermem")
    wd = Workdir(workdir_path)
    sp, evaluator, domain, backbone, ledger, agent_cfg = _setup(cfg, wd, backbone, benchmark)
    runs = {}  # run name -> (seed, agent, augmentation); the memory-free "base" run is shared
    base_agent = Agent(backbone, evaluator, domain, agent_cfg, wd.run_log("base"))
    runs["base"] = (None, base_agent, Augmentation())
    if method == "countermem":
        frozen = _load_frozen_checked(wd)
        memory_runs = _memory_runs(cfg, wd)
        check_artefacts = functools.partial(_artefacts, wd, frozen, memory_runs)
        index = _index(cfg, frozen.records, _checker(cfg, backbone, "evaluation"), True)
        for name, seed, selector, _ in memory_runs:
            agent = Agent(backbone, evaluator, domain, agent_cfg, wd.run_log(name))
            aug = CounterMemAugmentation(
                agent, phase="evaluation", index=index, selector=selector,
                render_condition=cfg.memory.render_condition and not cfg.eval.remove_conditions)
            if cfg.construction.corrections == "within_task":  # §6.1 "WM without CF"
                aug = WithinTaskChecks(aug, CounterfactualBuilder(
                    agent, None, _construction_config(cfg), agent.runlog))
            runs[name] = (seed, agent, aug)
        store_line = (f"store {frozen.content_hash()[:12]} ({len(frozen)} records), selector "
                      f"{cfg.eval.selector}")
    else:  # a baseline row: the same agent, backbone, budgets and tasks; its frozen memory
        check_artefacts = functools.partial(baselines.memory_fingerprint, method, wd.root)
        if method != "none":
            agent = Agent(backbone, evaluator, domain, agent_cfg, wd.run_log(method))
            runs[method] = (None, agent,
                            baselines.make_baseline_augmentation(method, cfg, agent, wd.root))
        store_line = f"method {method}"
    before = check_artefacts()
    wd.log.write("phase_start", phase="evaluation", verified=before, runs=list(runs))

    async def run_all():
        try:
            for run, (seed, agent, aug) in runs.items():
                done = agent.runlog.finished(run)
                todo = [t for t in sp.eval if t.task_id not in done]
                semaphore = asyncio.Semaphore(max(1, cfg.eval.concurrency))
                bar = tqdm.tqdm(total=len(todo), desc=f"evaluate {run}", unit="task",
                                dynamic_ncols=True, mininterval=1.0)
                extra = {} if seed is None else {"seed": seed}

                async def one(task, agent=agent, aug=aug, run=run, extra=extra):
                    async with semaphore:
                        return await agent.run(task, aug, phase="evaluation", run=run,
                                               extra=extra)
                for fut in asyncio.as_completed([one(t) for t in todo]):
                    await fut
                    bar.update(1)
                    bar.set_postfix(tokens=ledger.total("evaluation").total)
                bar.close()
        finally:
            await backbone.aclose()
    asyncio.run(run_all())
    after = check_artefacts()
    if after != before:
        raise PhaseError(f"frozen artefacts changed during evaluation: {before} -> {after}")
    result = _evaluation_metrics(cfg, wd, sp, runs)
    result["method"] = method
    result["verified_unchanged"] = after
    if method == "countermem":
        result["store"] = {"hash": frozen.content_hash(), "records": len(frozen)}
        metrics_path = wd.metrics if cfg.eval.selector == "dqn" else \
            wd.root / f"metrics_{memory_runs[0][2].name}.json"
    else:
        metrics_path = wd.metrics
    metrics_path.write_text(json.dumps(result, indent=1, default=str))
    agent_name = "ReAct" if cfg.agent.kind == "react" else "Reflexion"
    table = metrics.comparison_table(result, agent_name, METHOD_LABELS.get(method, method))
    verified = "frozen memory verified unchanged; " if after else ""  # none, best_of_n: no memory
    print(f"\n{cfg.data.benchmark}: {len(sp.eval)} held-out tasks, {store_line}\n{table}\n"
          f"{verified}metrics in {metrics_path}, per run in "
          f"{wd.eval_runs}/<run>/")
    wd.log.write("phase_end", phase="evaluation", metrics_file=str(metrics_path),
                 ledger=ledger.summary())
    return result


# How a method's row is labelled in evaluate's table (paper Table 1 names).
METHOD_LABELS = {"countermem": "CounterMem", "none": "None", "best_of_n": "Best-of-N",
                 "expel": "ExpeL", "generative_agents": "GenerativeAgents", "voyager": "Voyager",
                 "memgpt": "MemGPT", "reasoningbank": "ReasoningBank",
                 "reasoningbank_matts": "ReasoningBank+MaTTS",
                 "reasoningbank_verified": "ReasoningBank+verified"}


def _evaluation_metrics(cfg, wd: Workdir, sp, runs: dict) -> dict:
    """Per-run metrics (written to each run directory) and their aggregate over seeds."""
    eval_ids = {t.task_id for t in sp.eval}
    ends, decisions = {}, {}
    for run, (_, agent, _) in runs.items():
        ends[run], decisions[run] = _run_ends(agent.runlog, run, eval_ids)
    # The compared rows; method "none" has no row of its own: it is the base agent (Table 1).
    seeds = {run: seed for run, (seed, _, _) in runs.items() if run != "base"} or {"base": None}
    key = {run: ("fixed" if seed is None else str(seed)) for run, seed in seeds.items()}
    aggregate = metrics.seed_aggregate(ends["base"], {key[r]: ends[r] for r in seeds},
                                       {key[r]: decisions[r] for r in seeds}, decisions["base"])
    base = metrics.run_metrics(ends["base"], decisions["base"])
    for run in runs:
        per_run = base if run == "base" else dict(aggregate["per_seed"][key[run]],
                                                  paired=aggregate["paired"][key[run]])
        wd.run_dir(run).joinpath("metrics.json").write_text(json.dumps(
            {"run": run, "seed": seeds.get(run), "metrics": per_run}, indent=1, default=str))
    return {
        "benchmark": cfg.data.benchmark, "agent": cfg.agent.kind, "selector": cfg.eval.selector,
        "runs": {run: str(wd.run_dir(run)) for run in runs},
        "seeds": list(aggregate["per_seed"]),
        "base": base,
        "base_score": intervals.summarize(
            np.array([[100.0 * e["solved"] for e in sorted(ends["base"],
                                                           key=lambda e: e["task_id"])]])),
        "countermem": aggregate["mean"],
        "aggregate": aggregate,
        "paired": aggregate["paired"],
        "cost_of_building": metrics.building_cost(
            wd.log.events("task_end"),
            [e for e in wd.log.events("baseline_memory") if not e.get("task_id")]),
        "evaluation_cost": {_cost_label(r, key.get(r)): metrics.cost(ends[r]) for r in runs},
    }


def _cost_label(run: str, key: str | None) -> str:
    if run == "base":
        return "base"
    if not run.startswith("countermem"):
        return METHOD_LABELS.get(run, run)
    return "CounterMem, fixed selector" if key == "fixed" else f"CounterMem, seed {key}"
