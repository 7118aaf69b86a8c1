"""Phase 2 of Algorithm 1: the DQN selector on the training split over the frozen store
(paper §3.4, Appendix C.2).

Each seed in ``selector.seeds`` is its own real run (``SeedRun``): its own initial parameters
and exploration key, ε-greedy episodes on the training split, greedy validation episodes at
every checkpoint, and the checkpoint with the highest mean validation return kept as best. The
best checkpoints' file fingerprints are recorded for evaluation to verify.
"""
import asyncio

import numpy as np
import tqdm

from countermem_jax import baselines, metrics
from countermem_jax.agents import Agent
from countermem_jax.memory_use import CounterMemAugmentation
from countermem_jax.phases import context
from countermem_jax.phases.workdir import PhaseError, Workdir
from countermem_jax.selector import checkpoint, policies, training
from countermem_jax import workdir_guard


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
    ctx = context.setup(cfg, wd, backbone, benchmark)
    frozen = wd.load_frozen_checked()
    _check_training_splits(ctx.splits)
    index = context.retrieval_index(cfg, frozen.records, context.condition_checker(cfg))
    agent = Agent(ctx.backbone, ctx.evaluator, ctx.domain, ctx.agent_cfg, wd.log)
    wd.log.write("phase_start", phase="selector_training", seeds=list(seeds))

    async def run_seeds() -> dict:
        try:
            return {seed: await SeedRun(cfg, wd, ctx.splits, agent, index, seed).train(ctx.ledger)
                    for seed in seeds}
        finally:
            await ctx.backbone.aclose()
    per_seed = asyncio.run(run_seeds())
    wd.record_best_checkpoints({s: r["best_step"] for s, r in per_seed.items()})
    summary = {"seeds": {str(s): r for s, r in per_seed.items()},
               "tokens": ctx.ledger.total("selector_training").total}
    wd.log.write("phase_end", phase="selector_training", ledger=ctx.ledger.summary(), **summary)
    for seed, result in per_seed.items():
        _print_seed(wd, seed, result)
    return summary


class SeedRun:
    """One selector seed's own training run: ε-greedy episodes on the training split with the
    seed's own initial parameters and exploration key, greedy validation episodes at every
    checkpoint, the checkpoint with the highest mean validation return kept (Appendix C.2).

    Resumes from the log after a kill: the seed's logged transitions are replayed through the
    learner (``training.replay``, bit-identical to the uninterrupted run) and checkpoints whose
    validation did not finish are validated again. The LLM response cache makes the repeated
    drafts of later seeds (and of resumed episodes) cost no new calls.
    """

    def __init__(self, cfg, wd: Workdir, sp, agent: Agent, index, seed: int):
        self.cfg, self.dcfg, self.wd, self.sp = cfg, context.dqn_config(cfg), wd, sp
        self.agent, self.index = agent, index
        self.seed = seed
        self.ckpt = checkpoint.SelectorCheckpointer(wd.seed_dir(seed), self.dcfg, seed)
        self.pending: list = []
        self.learner = training.OnlineLearner(
            self.dcfg, seed, on_checkpoint=lambda d, p: self.pending.append((d, p)))
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
                          rows=[transition_fields(row) for row in rows])
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

    async def _episode(self, ledger, bar) -> None:
        """One ε-greedy training episode; its transitions are logged, then the checkpoints it
        reached are validated and saved."""
        task = self.sp.train[self.episode % len(self.sp.train)]
        rows: list = []
        before = self.learner.decisions
        await self.agent.run(task, self._augmentation(rows, learner=self.learner),
                             phase="selector_training",
                             run=f"train/seed{self.seed}/episode{self.episode}",
                             extra={"seed": self.seed})
        for row in rows:
            self.wd.log.write("transition", seed=self.seed, episode=self.episode,
                              **transition_fields(row))
        await self._save_pending()
        bar.update(self.learner.decisions - before)
        bar.set_postfix(episode=self.episode, tokens=ledger.total("selector_training").total)
        self.episode += 1

    async def train(self, ledger) -> dict:
        """Replays the seed's logged transitions, trains to ``total_decisions``, validates the
        last partial interval and returns the seed's best checkpoint and validation returns."""
        replayed = self._events("transition")
        training.replay(self.learner, [transition_tuple(t) for t in replayed])
        self.episode = len({t["episode"] for t in replayed})
        self.wd.log.write("seed_start", phase="selector_training", seed=self.seed,
                          decisions_done=self.learner.decisions, episodes_done=self.episode)
        await self._save_pending()  # checkpoints reached before a kill but never validated
        bar = tqdm.tqdm(total=self.dcfg.total_decisions, initial=self.learner.decisions,
                        desc=f"train selector seed {self.seed}", unit="decision",
                        dynamic_ncols=True, mininterval=1.0)
        while not self.learner.done:
            await self._episode(ledger, bar)
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
        train = [transition_tuple(t) for t in self._events("transition")]
        latest = {e["checkpoint"]: e["rows"] for e in self._events("validation_transitions")}
        val = [transition_tuple(r) for rows in latest.values() for r in rows]
        if train:
            training.save_log(training.log_from_rows(train, val),
                              self.wd.selector / f"transitions_seed{self.seed}.npz")


def transition_fields(row) -> dict:
    """A transition tuple as the run log's fields."""
    obs, action, reward, next_obs, next_mask, done, mask, task_id = row
    return {"task_id": task_id, "obs": obs, "action": action, "reward": reward,
            "next_obs": next_obs, "next_mask": next_mask, "done": done, "mask": mask}


def transition_tuple(e: dict) -> tuple:
    """A logged transition back as the learner's tuple."""
    return (np.asarray(e["obs"], np.float32), int(e["action"]), float(e["reward"]),
            np.asarray(e["next_obs"], np.float32), np.asarray(e["next_mask"], bool),
            float(e["done"]), np.asarray(e["mask"], bool), e["task_id"])
