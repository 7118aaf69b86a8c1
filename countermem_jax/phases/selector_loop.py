"""The selector's training loop for one seed, Algorithm 1 phase 2 (paper Appendix C.2), on one
screen in the manner of CleanRL's ``dqn_jax.py``; acting in waves and resuming after a kill are
wrappers around it (docs/concurrency.md).

``dqn_loop`` is the loop: ε-greedy episodes act on the training split, every closed decision
(z, j, r, z', d) is stored in the replay buffer and learned from (one Adam step every
``train_every`` decisions after ``learning_starts``, θ⁻ ← θ every ``target_sync_every``: the
jitted ``dqn.schedule``), and every ``checkpoint_every`` decisions a checkpoint is validated on
real episodes, the best kept. What acts is the loop's ``act`` argument:

  one_at_a_time  W = 1, the sequential learner: it acts with the parameters as they are at each
                 decision (its own key chain) and learns as each decision closes;
  in_waves       W > 1: W episodes act at once, each ε-greedily with the parameters and ε of the
                 wave's start and keys from (seed, episode, decision) (``EpisodeExplorer``);
                 their decisions are then learned from in (episode, decision) order, as the
                 sequential learner counts them, and the episodes past ``total_decisions``
                 dropped, so a W's result never depends on how its episodes interleave;
  resumed        after a kill: first the episodes of the complete waves logged before it, fed
                 to the loop as they were learned (so parameters, key, checkpoints and curves
                 come out bit-identical), then the interrupted wave again, its logged episodes
                 reused, then the above.
"""
import asyncio
from typing import Awaitable, Callable, Protocol, Sequence

from countermem_jax.method.selector import dqn, policies, training
from countermem_jax.method.selector.transition import Transition

Learn = Callable[[Transition], None]
# act(learner, learn, episode): runs the next episodes from number ``episode`` on; ``learn`` is
# handed each of their closed decisions in the order the sequential learner takes them
Act = Callable[[training.OnlineLearner, Learn, int], Awaitable[None]]


class SeedRecords(Protocol):
    """What the loop keeps of a seed's run (``phases.train.SeedRun``)."""

    def write_curves(self, rows: list[Transition], learner: training.OnlineLearner) -> None:
        """The learner's curves once an episode (``rows``) has entered it."""

    def log_episode(self, episode: int, rows: list[Transition]) -> None:
        """An entered episode's transitions, in one durable write."""

    async def checkpoint(self, reached: Sequence[tuple[int, object]]) -> None:
        """Validates the checkpoints ``reached`` ((decisions, params), together) and saves them
        (those saved before a kill are not validated again)."""

    def saved_steps(self) -> list[int]:
        """The decision counts of the saved checkpoints."""

    def begin(self, decisions: int, episode: int) -> None:
        """The seed starts, or resumes with ``decisions`` and ``episodes`` logged as done."""


async def dqn_loop(learner: training.OnlineLearner, act: Act, run: SeedRecords) -> int:
    """Trains ``learner`` to ``total_decisions``; returns the episodes entered."""
    cfg, reached, rows, entered, episode = learner.cfg, [], [], [], 0

    def learn(t: Transition) -> None:
        learner.observe(t)      # store t in D; update after warm-up; sync θ⁻ (dqn.schedule)
        if dqn.is_checkpoint(cfg, learner.decisions):
            reached.append((learner.decisions, learner.state.params))
        rows.append(t)
        if t.done:              # the episode has entered the learner
            run.write_curves(rows, learner)
            entered.append(rows.copy())
            rows.clear()

    while not learner.done:
        await act(learner, learn, episode)       # ε-greedy episodes, their decisions learned
        for done_rows in entered:
            run.log_episode(episode, done_rows)
            episode += 1
        entered.clear()
        await run.checkpoint(reached)            # validated on real episodes, the best kept
        reached.clear()
    if learner.decisions not in run.saved_steps():   # the last, partial interval
        await run.checkpoint([(learner.decisions, learner.state.params)])
    return episode


class _Learning:
    """The learner acting in its own episode (W = 1), a ``policies.Selector``: ``select``
    ε-greedily with its current parameters and key chain; ``observe`` hands each closed decision
    to the loop at once."""

    def __init__(self, learner: training.OnlineLearner, learn: Learn):
        self.name, self.select, self.observe = learner.name, learner.select, learn


def one_at_a_time(run_episode: Callable[[int, policies.Selector], Awaitable]) -> Act:
    """W = 1: one episode, the learner acting and learning at each decision."""
    async def act(learner, learn, episode):
        await run_episode(episode, _Learning(learner, learn))
    return act


def in_waves(run_episode: Callable[[int, policies.Selector], Awaitable[list]], wave_size: int,
             seed: int, reused: dict) -> Act:
    """W > 1: a wave of episodes acting at once (module docstring); ``reused``: episodes of a
    wave interrupted by a kill, logged before it, taken instead of run again."""
    async def act(learner, learn, start):
        cfg, params = learner.cfg, learner.state.params
        eps = float(dqn.epsilon(cfg, learner.decisions))

        async def one(episode: int) -> list:
            if episode in reused:
                return reused.pop(episode)
            return await run_episode(episode, policies.EpisodeExplorer(cfg, params, eps, seed,
                                                                       episode))
        # every episode makes at least one decision: never start one certainly dropped
        size = min(wave_size, cfg.total_decisions - learner.decisions)
        episodes = await asyncio.gather(*(one(e) for e in range(start, start + size)))
        for episode, rows in enumerate(episodes, start):
            if episode > start and learner.done:   # the sequential learner never started it
                break
            for t in rows:
                learn(t)
    return act


def resumed(logged: dict[int, list], wave_size: int, act: Act) -> Act:
    """``act`` after the complete waves of ``logged`` (episode -> transitions, what the log
    holds after a kill) are fed to the loop in order, in its first call."""
    complete = [logged[e] for e in range(len(logged) - len(logged) % wave_size)]

    async def replay_then_act(learner, learn, episode):
        if not complete:
            return await act(learner, learn, episode)
        for t in (t for rows in complete for t in rows):
            if wave_size == 1:   # the learner acted itself: its key advanced at each choice
                learner.select(t.obs, t.mask)
            learn(t)
        complete.clear()
    return replay_then_act


async def train(learner: training.OnlineLearner, run: SeedRecords, logged: dict[int, list],
                wave_size: int, run_episode: Callable[[int, policies.Selector], Awaitable]) -> int:
    """``dqn_loop`` acting ``wave_size`` episodes at a time, resumed from ``logged``; returns the
    episodes entered."""
    start = len(logged) - len(logged) % wave_size
    run.begin(sum(len(logged[e]) for e in range(start)), start)
    act = (one_at_a_time(run_episode) if wave_size == 1 else
           in_waves(run_episode, wave_size, learner.seed,
                    {e: rows for e, rows in logged.items() if e >= start}))
    return await dqn_loop(learner, resumed(logged, wave_size, act), run)
