"""Phase 2 of Algorithm 1: the DQN selector on the training split over the frozen store (paper
§3.4, Appendix C.2). Each seed in ``selector.seeds`` is its own run (``SeedRun``, looping in
``dqn_loop``), the seeds concurrently; the best checkpoints' fingerprints are recorded for
evaluation to verify. Waves and resumption: docs/concurrency.md.
"""
import asyncio

import numpy as np
import tqdm

from countermem_jax import baselines
from countermem_jax.runtime import curves
from countermem_jax.protocol import metrics
from countermem_jax.method.agents import Agent, MemoryCalls
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.runtime import inflight
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
                                    groups=ctx.splits.groups, world=context.world_check(ctx),
                                    names=ctx.domain.names)
    agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.log,
                  ctx.parse_failures, checks=ctx.checks)
    wd.log.write("phase_start", phase="selector_training", seeds=list(seeds))

    async def run_seeds() -> dict:
        try:
            runs = [SeedRun(ctx.method, cfg.selector.wave_size, wd, ctx.splits, agent,
                            index, seed, ctx.ledger) for seed in seeds]
            # a seed that fails does not stop the others: their work is kept for the resume
            results = await asyncio.gather(*(run.train() for run in runs),
                                           return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                raise failed[0]
            return dict(zip(seeds, results))
        finally:
            await ctx.backbone.aclose()
    per_seed = inflight.run(run_seeds())
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


async def dqn_loop(learner: training.OnlineLearner, run: "SeedRun", wave_size: int,
                   logged: dict[int, list]) -> int:
    """One seed's training to ``total_decisions`` (Algorithm 1 phase 2, Appendix C.2), in the
    manner of CleanRL's ``dqn_jax.py``; returns the episodes entered.

    ``wave_size`` W episodes act at once, each ε-greedily with the parameters and ε of the
    wave's start and keys from (seed, episode, decision); their decisions are then learned in
    (episode, decision) order and the episodes the sequential learner would not have started
    dropped, so a W's result never depends on how its episodes interleave. At W = 1 the learner
    acts itself, learning as each decision closes. ``logged`` (episode -> transitions) is what a
    kill left in the log: its complete waves are learned again as they were learned (parameters,
    key, checkpoints and curves come out bit-identical), the interrupted wave's episodes reused.
    """
    cfg = learner.cfg
    start = len(logged) - len(logged) % wave_size
    replayed = [logged[e] for e in range(start)]            # the complete waves logged
    reused = {e: logged[e] for e in logged if e >= start}   # the interrupted wave's, logged
    run.begin(sum(map(len, replayed)), start)
    episode = 0
    while not learner.done:
        # act: ε-greedy episodes on the training split
        if replayed:             # resuming: the logged waves, to be learned again below
            wave, replayed, learned = replayed, [], False
        elif wave_size == 1:     # the learner acts, storing and learning at each decision
            wave, learned = [await run.train_episode(episode, learner)], True
        else:                    # W episodes act with the wave's θ and ε
            params, eps = learner.state.params, float(dqn.epsilon(cfg, learner.decisions))
            # every episode makes at least one decision: never start one certainly dropped
            size = min(wave_size, cfg.total_decisions - learner.decisions)
            wave, learned = list(await asyncio.gather(*(
                _logged(reused.pop(e)) if e in reused else run.train_episode(
                    e, policies.EpisodeExplorer(cfg, params, eps, learner.seed, e))
                for e in range(episode, episode + size)))), False
        # store each decision in D and learn: an Adam step every train_every decisions after
        # learning_starts, θ⁻ ← θ every target_sync_every (dqn.schedule)
        for i, rows in enumerate(wave):
            if i and learner.done:   # the sequential learner never started it
                del wave[i:]
                break
            if not learned:          # at W = 1 a replay advances the key as acting did
                training.replay(learner, rows, acted=wave_size == 1)
            run.write_curves(rows, learner)
        for rows in wave:
            run.log_episode(episode, rows)
            episode += 1
        # validate the checkpoints reached (every checkpoint_every decisions), keep the best
        await run.checkpoint(learner.checkpoints)
        learner.checkpoints.clear()
    if learner.decisions not in run.saved_steps():   # the last, partial interval
        await run.checkpoint([(learner.decisions, learner.state.params)])
    return episode


async def _logged(rows: list) -> list:
    """A logged episode of the interrupted wave, in place of running it again."""
    return rows


class SeedRun:
    """One selector seed's training run (Appendix C.2): its own initial parameters and exploration
    key, ε-greedy episodes on the training split, greedy validation at every checkpoint, the best
    checkpoint kept; ``dqn_loop`` drives it. The response cache makes later seeds' repeated
    drafts cost no new calls."""

    def __init__(self, method: context.MethodConfig, wave_size: int, wd: Workdir, sp,
                 agent: Agent, index, seed: int, ledger):
        self.dcfg, self.render_condition = method.dqn, method.use.render_condition
        self.revision = method.use.revision
        self.wd, self.sp, self.ledger = wd, sp, ledger
        self.agent, self.calls, self.index = agent, MemoryCalls(agent), index
        self.seed = seed
        self.wave_size = int(wave_size)
        self.ckpt = checkpoint.SelectorCheckpointer(wd.seed_dir(seed), self.dcfg, seed)
        self.on_disk: set[int] = set()   # episodes logged before a kill
        self.curves = curves.CurveWriter(wd.curves / "selector" / f"seed_{seed}")
        self.bar = None

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

    async def train_episode(self, episode: int, selector: policies.Selector) -> list:
        """Training episode ``episode`` (the training split in turn) under ``selector``."""
        task = self.sp.train[episode % len(self.sp.train)]
        rows, _ = await self._run_episode(task, selector, f"train/seed{self.seed}/episode{episode}")
        return rows

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

    async def checkpoint(self, reached) -> None:
        """Validates the checkpoints ``reached`` ((decisions, params)) not saved yet, all at once
        (their validation episodes run concurrently), and saves them in order; the curves get
        the validation return of those saved before a kill again (its points may be lost)."""
        # transitions are not fsynced one by one (``runlog``): make the ones these
        # checkpoints count durable before they are written
        self.wd.log.sync()
        done = set(self.ckpt.steps())
        if any(decisions in done for decisions, _ in reached):
            saved = self.ckpt.val_returns()
            for decisions in sorted(done.intersection(d for d, _ in reached)):
                self.curves.scalars(decisions, {"validation/return": saved[decisions]})
        todo = [(decisions, params) for decisions, params in reached if decisions not in done]
        returns = await asyncio.gather(*(self.validate(d, p) for d, p in todo))
        for (decisions, params), value in zip(todo, returns):
            self.ckpt.save(decisions, params, value)
            self.curves.scalars(decisions, {"validation/return": value})

    def saved_steps(self) -> list[int]:
        """The decision counts of the checkpoints saved so far."""
        return self.ckpt.steps()

    def write_curves(self, rows: list, learner: training.OnlineLearner) -> None:
        """The learner's curves after an episode entered it, at its decision count: mean loss of
        the updates since the last episode, ε, and the mean over the episode's decisions of the
        largest valid Q-value under the current parameters."""
        params, decisions = learner.state.params, learner.decisions
        values = {"train/epsilon": float(dqn.epsilon(self.dcfg, decisions))}
        if learner.losses:
            values["train/loss"] = float(np.mean(learner.losses))
            learner.losses.clear()
        if rows:
            q = np.asarray(dqn.q_values(self.dcfg, params, np.stack([t.obs for t in rows])))
            masks = [t.mask if t.mask is not None else np.ones(q.shape[1], bool) for t in rows]
            values["train/mean_q"] = float(np.mean(np.where(np.stack(masks), q, -np.inf).max(1)))
        self.curves.scalars(decisions, values)

    def log_episode(self, episode: int, rows: list) -> None:
        """An entered episode's transitions, in one write (a kill never leaves half of one);
        those of an episode logged before a kill are not written again."""
        if episode not in self.on_disk:
            events = EventBuffer()
            for t in rows:
                events.write("transition", seed=self.seed, episode=episode, **t.to_json())
            self.wd.log.write_all(events)
        self.bar.update(len(rows))
        self.bar.set_postfix(episode=episode,
                             tokens=self.ledger.total("selector_training").total)

    def logged(self) -> dict[int, list]:
        """The episodes logged before a kill (episode -> transitions)."""
        logged: dict[int, list] = {}
        for e in self._events("transition"):
            logged.setdefault(int(e["episode"]), []).append(Transition.from_json(e))
        self.on_disk = set(logged)
        return logged

    def begin(self, decisions: int, episode: int) -> None:
        """Logs the seed's start with what a resume found done; opens the progress bar (the
        episodes a resume replays move it as they enter the learner)."""
        self.wd.log.write("seed_start", phase="selector_training", seed=self.seed,
                          decisions_done=decisions, episodes_done=episode)
        self.bar = tqdm.tqdm(total=self.dcfg.total_decisions,
                             desc=f"train selector seed {self.seed}", unit="decision",
                             dynamic_ncols=True, mininterval=1.0)

    async def train(self) -> dict:
        """Trains the seed to ``total_decisions`` (resumed after a kill) and returns its best
        checkpoint and validation returns."""
        learner = training.OnlineLearner(self.dcfg, self.seed)
        try:
            episodes = await dqn_loop(learner, self, self.wave_size, self.logged())
        finally:   # a failed seed's bar ends its line: the error is a line of its own
            if self.bar is not None:
                self.bar.close()
            self.curves.close()
        best, returns = self.ckpt.best_step(), self.ckpt.val_returns()
        self.ckpt.close()
        self._save_log()
        return {"decisions": learner.decisions, "episodes": episodes, "best_step": best,
                "best_val_return": returns[best], "val_returns": returns}

    def _save_log(self) -> None:
        """The seed's transitions (training rows, and the validation rows of its checkpoints)
        as a transition log for offline analysis (``benchmarks/speed/selector_offline.py``)."""
        train = [Transition.from_json(t) for t in self._events("transition")]
        latest = {e["checkpoint"]: e["rows"] for e in self._events("validation_transitions")}
        val = [Transition.from_json(r) for rows in latest.values() for r in rows]
        if train:
            training.save_log(training.log_from_transitions(train, val),
                              self.wd.selector / f"transitions_seed{self.seed}.npz")
