"""Phase 2 of Algorithm 1: the DQN selector on the training split over the frozen store
(paper §3.4, Appendix C.2).

Each seed in ``selector.seeds`` is its own real run (``SeedRun``): its own initial parameters
and exploration key, ε-greedy episodes on the training split, greedy validation episodes at
every checkpoint, and the checkpoint with the highest mean validation return kept as best. The
best checkpoints' file fingerprints are recorded for evaluation to verify.

Training runs in waves of ``selector.wave_size`` (W) episodes (docs/concurrency.md). W = 1 is the sequential online learner: it acts with the parameters as they are at each
decision and learns as each decision closes. For W > 1 the wave's episodes run concurrently, each
acting ε-greedily with the parameters and ε of the wave's start and exploration keys derived from
(seed, episode, decision index) (``policies.EpisodeExplorer``); their transitions then enter the
learner in (episode, decision) order and the schedule (updates, target syncs, checkpoints,
validation) counts them as the sequential learner counts decisions; the episodes a wave ran past
``total_decisions`` are dropped. The result of a W is therefore the same whatever the event loop's
interleaving. Validation episodes at a checkpoint run concurrently, and the seeds train
concurrently (one asyncio task each, sharing the agent's backbone and its concurrency limit).
"""
import asyncio
from typing import Callable

import numpy as np
import tqdm

from countermem_jax import baselines
from countermem_jax.runtime import curves
from countermem_jax.protocol import metrics
from countermem_jax.method.agents import Agent, MemoryCalls
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.runtime import phase_loop
from countermem_jax.phases import context
from countermem_jax.phases.workdir import PhaseError, Workdir
from countermem_jax.runtime.runlog import EventBuffer
from countermem_jax.method.selector import checkpoint, dqn, policies, training
from countermem_jax.method.selector.transition import Transition
from countermem_jax.phases import workdir_guard


def _seeds(cfg) -> tuple:
    seeds = tuple(int(s) for s in cfg.selector.seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise PhaseError(f"selector.seeds={seeds}: give one or more distinct seeds")
    return seeds


def _check_training_splits(sp) -> None:
    if not sp.train:
        raise PhaseError("no selector-training tasks (splits.n_train = 0)")
    if not sp.validation:
        raise PhaseError("no selector-validation tasks (splits.n_validation = 0): every seed "
                         "keeps the checkpoint with the highest mean validation return")


def _print_seed(wd: Workdir, seed: int, result: dict) -> None:
    print(f"selector seed {seed}: {result['decisions']} decisions over {result['episodes']} "
          f"episodes; best checkpoint at {result['best_step']} decisions, mean validation return "
          f"{result['best_val_return']:.4f} ({wd.seed_dir(seed)})")


@workdir_guard.guarded_phase("train_selector")  # config checked, phase locked, fingerprint
def train_selector(cfg, workdir_path, *, backbone=None, benchmark=None) -> dict:
    """Trains one selector per seed in ``selector.seeds``, each a real run (Appendix C.2); a
    no-op that says so for a baseline method (it has no selector). Returns per-seed decisions,
    episodes, best step and validation returns."""
    method = cfg.get("method", "countermem")
    if not baselines.needs_selector(method):
        print(baselines.skip_message(method, "train_selector"))
        return {"method": method, "skipped": True}
    seeds = _seeds(cfg)
    wd = Workdir(workdir_path)
    frozen = wd.load_frozen_checked()  # what training needs is read before the backbone is made
    if not len(frozen):
        return _empty_store(cfg, wd, seeds)
    for seed in seeds:
        checkpoint.check_metrics_files(wd.seed_dir(seed))
    ctx = context.setup(cfg, wd, backbone, benchmark)
    _check_training_splits(ctx.splits)
    index = context.retrieval_index(ctx.method, frozen.records,
                                    context.condition_checker(ctx.method),
                                    groups=ctx.splits.groups, world=context.world_check(ctx))
    agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.log,
                  ctx.parse_failures, checks=ctx.checks)
    wd.log.write("phase_start", phase="selector_training", seeds=list(seeds))

    async def run_seeds() -> dict:
        try:
            runs = [SeedRun(ctx.method, cfg.selector.wave_size, wd, ctx.splits, agent,
                            index, seed) for seed in seeds]
            # a seed that fails does not stop the others: their work is kept for the resume
            results = await asyncio.gather(*(run.train(ctx.ledger) for run in runs),
                                           return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                raise failed[0]
            return dict(zip(seeds, results))
        finally:
            await ctx.backbone.aclose()
    per_seed = phase_loop.run(run_seeds())
    wd.record_best_checkpoints({s: r["best_step"] for s, r in per_seed.items()})
    summary = {"seeds": {str(s): r for s, r in per_seed.items()},
               "tokens": ctx.ledger.total("selector_training").total}
    wd.log.write("phase_end", phase="selector_training", ledger=ctx.ledger.summary(),
                 replies=ctx.parse_failures.summary(), **summary)
    for seed, result in per_seed.items():
        _print_seed(wd, seed, result)
    return summary


def _empty_store(cfg, wd: Workdir, seeds) -> dict:
    """Selector training over an empty store: no decision has a record to choose, so every
    episode would only repeat the memory-free agent. Ends at once, before any model is loaded,
    with each seed's initial parameters saved as its step-0 checkpoint (what evaluation
    restores) and a validation return of 0 (no reuse, no cost)."""
    print("train_selector: the frozen store is empty, so the selector has no record to choose "
          "at any decision; training ends here (initial parameters saved as step 0)")
    dcfg, per_seed = context.method_config(cfg).dqn, {}
    for seed in seeds:
        ckpt = checkpoint.SelectorCheckpointer(wd.seed_dir(seed), dcfg, seed)
        if 0 not in ckpt.steps():
            ckpt.save(0, training.OnlineLearner(dcfg, seed).state.params, 0.0)
        per_seed[seed] = {"decisions": 0, "episodes": 0, "best_step": 0, "best_val_return": 0.0,
                          "val_returns": {0: 0.0}}
        ckpt.close()
    wd.record_best_checkpoints({s: 0 for s in per_seed})
    summary = {"seeds": {str(s): r for s, r in per_seed.items()}, "tokens": 0,
               "empty_store": True}
    wd.log.write("phase_end", phase="selector_training", **summary)
    return summary


class SeedRun:
    """One selector seed's own training run: ε-greedy episodes on the training split with the
    seed's own initial parameters and exploration key, greedy validation episodes at every
    checkpoint, the checkpoint with the highest mean validation return kept (Appendix C.2),
    in waves of ``selector.wave_size`` episodes (module docstring).

    Resumes from the log after a kill: the logged transitions of the seed's complete waves are
    replayed through the learner (``training.replay``, bit-identical to the uninterrupted run),
    the interrupted wave is run again from its start with its logged episodes reused, and
    checkpoints whose validation did not finish are validated again. The LLM response cache
    makes the repeated drafts of later seeds (and of resumed episodes) cost no new calls.
    """

    def __init__(self, method: context.MethodConfig, wave_size: int, wd: Workdir, sp,
                 agent: Agent, index, seed: int):
        self.dcfg, self.render_condition = method.dqn, method.use.render_condition
        self.revision = method.use.revision
        self.wd, self.sp = wd, sp
        self.agent, self.calls, self.index = agent, MemoryCalls(agent), index
        self.seed = seed
        self.wave_size = int(wave_size)
        self.ckpt = checkpoint.SelectorCheckpointer(wd.seed_dir(seed), self.dcfg, seed)
        self.pending: list = []
        self.learner = training.OnlineLearner(
            self.dcfg, seed, on_checkpoint=lambda d, p: self.pending.append((d, p)))
        self.episode = 0
        self.curves = curves.CurveWriter(wd.curves / "selector" / f"seed_{seed}")

    def _augmentation(self, rows: list, selector: policies.Selector) -> CounterMemAugmentation:
        return CounterMemAugmentation(self.calls, index_source=lambda: self.index,
                                      selector=selector, dqn_cfg=self.dcfg, transitions=rows,
                                      render_condition=self.render_condition,
                                      revision=self.revision)

    def _events(self, event: str) -> list[dict]:
        return [e for e in self.wd.log.events(event) if e.get("seed", 0) == self.seed]

    async def _run_episode(self, task, selector: policies.Selector, run: str) -> tuple[list, float]:
        """One episode of ``task`` under ``selector``: its transitions and its return."""
        rows: list[Transition] = []
        aug = self._augmentation(rows, selector)
        await self.agent.run(task, aug, phase="selector_training", run=run,
                             extra={"seed": self.seed})
        return rows, aug.episode_returns.get(task.task_id, float("nan"))

    async def validate(self, decisions: int, params) -> float:
        """Mean return of the greedy policy over the real validation episodes, run concurrently."""
        greedy = policies.GreedyDQN(self.dcfg, params)
        run = f"{metrics.VALIDATION}/seed{self.seed}@{decisions}"
        episodes = await asyncio.gather(*(self._run_episode(task, greedy, run)
                                          for task in self.sp.validation))
        returns = [value for _, value in episodes]
        value = float(np.mean(returns))
        if not np.isfinite(value):
            raise PhaseError(f"selector seed {self.seed}, checkpoint {decisions}: validation "
                             f"returns {returns} are not finite")
        self.wd.log.write("validation_transitions", seed=self.seed, checkpoint=decisions,
                          rows=[t.to_json() for rows, _ in episodes for t in rows])
        return value

    async def _save_pending(self) -> None:
        """Validates the checkpoints reached since the last call, all at once (their validation
        episodes run concurrently), and saves them in order."""
        # transitions are not fsynced one by one (``runlog``): make the ones these
        # checkpoints count durable before they are written
        self.wd.log.sync()
        done = set(self.ckpt.steps())
        todo = [(decisions, params) for decisions, params in self.pending if decisions not in done]
        returns = await asyncio.gather(*(self.validate(d, p) for d, p in todo))
        for (decisions, params), value in zip(todo, returns):
            self.ckpt.save(decisions, params, value)
            self.curves.scalars(decisions, {"validation/return": value})
        self.pending.clear()

    def _write_curves(self, rows: list) -> None:
        """The learner's curves after an episode entered it, at its decision count: mean loss of
        the updates since the last episode, ε, and the mean over the episode's decisions of the
        largest valid Q-value under the current parameters."""
        params, decisions = self.learner.state.params, self.learner.decisions
        values = {"train/epsilon": float(dqn.epsilon(self.dcfg, decisions))}
        if self.learner.losses:
            values["train/loss"] = float(np.mean(self.learner.losses))
            self.learner.losses.clear()
        if rows:
            q = np.asarray(dqn.q_values(self.dcfg, params, np.stack([t.obs for t in rows])))
            masks = [t.mask if t.mask is not None else np.ones(q.shape[1], bool) for t in rows]
            values["train/mean_q"] = float(np.mean(np.where(np.stack(masks), q, -np.inf).max(1)))
        self.curves.scalars(decisions, values)

    def _behaviour(self) -> Callable[[int], policies.Selector]:
        """The selector an episode of the next wave acts with, by episode number: the learner
        itself at W = 1, else a frozen ε-greedy explorer at the wave's start."""
        if self.wave_size == 1:
            return lambda episode: self.learner
        params = self.learner.state.params
        eps = float(dqn.epsilon(self.dcfg, self.learner.decisions))
        return lambda episode: policies.EpisodeExplorer(self.dcfg, params, eps, self.seed,
                                                        episode)

    async def _wave(self, logged: dict, ledger, bar) -> None:
        """The next wave: its episodes run concurrently (those logged before a kill are reused),
        then enter the learner in episode order until ``total_decisions``; each entered
        episode's transitions are logged and the checkpoints it reached validated and saved."""
        start, behaviour, decisions = self.episode, self._behaviour(), self.learner.decisions

        async def one(episode: int) -> list:
            if episode in logged:
                return logged[episode]
            task = self.sp.train[episode % len(self.sp.train)]
            rows, _ = await self._run_episode(task, behaviour(episode),
                                              f"train/seed{self.seed}/episode{episode}")
            return rows
        # every episode makes at least one decision, so no more than the decisions still to go
        # can enter the learner: a wave never starts the episodes it would certainly drop (it
        # is then the last wave, and a resume recomputes the same count)
        size = min(self.wave_size, self.dcfg.total_decisions - decisions)
        episodes = await asyncio.gather(*(one(e) for e in range(start, start + size)))
        for episode, rows in enumerate(episodes, start):
            # the sequential learner would not have started an episode after the last decision
            if episode > start and self.learner.done:
                break
            if self.wave_size > 1:  # at W = 1 the learner observed them as they closed
                for t in rows:
                    self.learner.observe(t)
            if episode not in logged:  # one write per episode: a kill never leaves half of one
                events = EventBuffer()
                for t in rows:
                    events.write("transition", seed=self.seed, episode=episode, **t.to_json())
                self.wd.log.write_all(events)
            self.episode = episode + 1
            self._write_curves(rows)
            bar.set_postfix(episode=episode, tokens=ledger.total("selector_training").total)
        # the checkpoints the wave reached (one per episode at most when W = 1), validated
        # together; a kill before this re-runs the wave from its logged episodes (``_resume``)
        await self._save_pending()
        bar.update(self.learner.decisions - decisions)

    def _resume(self) -> dict:
        """Replays the logged transitions of the complete waves; returns the interrupted wave's
        logged episodes (episode -> transitions), which it reuses instead of running again."""
        logged: dict[int, list] = {}
        for e in self._events("transition"):
            logged.setdefault(int(e["episode"]), []).append(Transition.from_json(e))
        episodes = len(logged)
        self.episode = episodes - episodes % self.wave_size
        training.replay(self.learner, [t for e in range(self.episode) for t in logged[e]],
                        acted=self.wave_size == 1)
        return {e: rows for e, rows in logged.items() if e >= self.episode}

    async def train(self, ledger) -> dict:
        """Replays the seed's logged transitions, trains to ``total_decisions``, validates the
        last partial interval and returns the seed's best checkpoint and validation returns."""
        logged = self._resume()
        self.wd.log.write("seed_start", phase="selector_training", seed=self.seed,
                          decisions_done=self.learner.decisions, episodes_done=self.episode)
        await self._save_pending()  # checkpoints reached before a kill but never validated
        bar = tqdm.tqdm(total=self.dcfg.total_decisions, initial=self.learner.decisions,
                        desc=f"train selector seed {self.seed}", unit="decision",
                        dynamic_ncols=True, mininterval=1.0)
        while not self.learner.done:
            await self._wave(logged, ledger, bar)
            logged = {}
        bar.close()
        if self.learner.decisions not in self.ckpt.steps():  # the last partial interval
            params = self.learner.state.params
            value = await self.validate(self.learner.decisions, params)
            self.ckpt.save(self.learner.decisions, params, value)
            self.curves.scalars(self.learner.decisions, {"validation/return": value})
        best, returns = self.ckpt.best_step(), self.ckpt.val_returns()
        self.ckpt.close()
        self.curves.close()
        self._save_log()
        return {"decisions": self.learner.decisions, "episodes": self.episode, "best_step": best,
                "best_val_return": returns[best], "val_returns": returns}

    def _save_log(self) -> None:
        """The seed's transitions (training rows, and the validation rows of its checkpoints)
        as a transition log for offline analysis (``training.train_offline``)."""
        train = [Transition.from_json(t) for t in self._events("transition")]
        latest = {e["checkpoint"]: e["rows"] for e in self._events("validation_transitions")}
        val = [Transition.from_json(r) for rows in latest.values() for r in rows]
        if train:
            training.save_log(training.log_from_transitions(train, val),
                              self.wd.selector / f"transitions_seed{self.seed}.npz")
