"""The online learner of one selector seed and its transition log (paper Appendix C.2).
``OnlineLearner`` acts ε-greedily in its own episodes and learns from each closed decision,
driven by ``phases.train.dqn_loop``; ``replay`` rebuilds it bit-identically from its logged
decisions after a kill. ``log_from_transitions`` writes a seed's ``.npz`` transition log: ``obs``
[N, 98] float32, ``action`` [N] int32, ``reward`` [N] float32, ``next_obs`` [N, 98], ``next_mask``
[N, 5] bool, ``done`` [N] float32, ``mask`` [N, 5] bool, ``episode`` [N] int64, and the header
arrays ``obs_version`` and ``split`` ([N] of "train" / "validation").
"""
import dataclasses
import os
import pathlib
from typing import Sequence

import jax.numpy as jnp
import numpy as np

from countermem_jax.method.selector import dqn, features, policies
from countermem_jax.method.selector.transition import Transition


@dataclasses.dataclass
class TransitionLog:
    """A transition log as columns (the ``.npz`` format above), one row per decision."""
    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    next_mask: np.ndarray
    done: np.ndarray
    mask: np.ndarray
    episode: np.ndarray
    split: np.ndarray

    def __len__(self) -> int:
        return int(self.action.shape[0])

    def subset(self, split: str) -> "TransitionLog":
        """The rows of one split ("train" or "validation"), in log order."""
        keep = self.split == split
        return TransitionLog(**{f.name: getattr(self, f.name)[keep]
                                for f in dataclasses.fields(self)})

    def transitions(self) -> Transition:
        """The log's rows as one stacked ``Transition`` (what offline retraining scans)."""
        return Transition(obs=self.obs, action=self.action, reward=self.reward,
                          next_obs=self.next_obs, next_mask=self.next_mask,
                          done=self.done).for_replay()


def save_log(log: TransitionLog, path: str | os.PathLike) -> None:
    """Writes the log with the observation version it was built with."""
    arrays = {f.name: getattr(log, f.name) for f in dataclasses.fields(log)}
    np.savez_compressed(path, obs_version=np.int64(features.OBS_VERSION), **arrays)


def load_log(path: str | os.PathLike) -> TransitionLog:
    """Loads and checks a transition log; errors name the file and the array."""
    path = pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no transition log")
    with np.load(path, allow_pickle=False) as data:
        version = int(data["obs_version"]) if "obs_version" in data else None
        if version != features.OBS_VERSION:
            raise ValueError(f"{path}: observation version {version}, this code reads "
                             f"{features.OBS_VERSION}")
        names = [f.name for f in dataclasses.fields(TransitionLog)]
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"{path}: missing arrays {missing}")
        log = TransitionLog(**{n: data[n] for n in names})
    n = len(log)
    shapes = {"obs": (n, features.OBS_DIM), "next_obs": (n, features.OBS_DIM),
              "next_mask": (n, features.NUM_ACTIONS), "mask": (n, features.NUM_ACTIONS)}
    for name, shape in shapes.items():
        if getattr(log, name).shape != shape:
            raise ValueError(f"{path}: array {name!r} has shape {getattr(log, name).shape}, "
                             f"expected {shape}")
    for name in ("reward", "next_mask", "done", "mask", "episode", "split"):
        if getattr(log, name).shape[0] != n:
            raise ValueError(f"{path}: array {name!r} has {getattr(log, name).shape[0]} rows, "
                             f"expected {n}")
    bad = ~log.mask[np.arange(n), log.action]
    if bad.any():
        raise ValueError(f"{path}: row {int(np.flatnonzero(bad)[0])}: logged action is masked")
    return log


def log_from_transitions(train: Sequence[Transition],
                         validation: Sequence[Transition]) -> TransitionLog:
    """A transition log from logged decisions in episode order; an episode ends at a ``done``."""
    rows = list(train) + list(validation)
    split = ["train"] * len(train) + ["validation"] * len(validation)
    column = lambda name, dtype=None: np.asarray([getattr(t, name) for t in rows], dtype)
    ends = column("done", np.float32) > 0
    episode = np.concatenate([[0], np.cumsum(ends[:-1])]).astype(np.int64)
    return TransitionLog(obs=np.stack(column("obs")), action=column("action", np.int32),
                         reward=column("reward", np.float32), next_obs=np.stack(column("next_obs")),
                         next_mask=np.stack(column("next_mask")), done=column("done", np.float32),
                         mask=np.stack(column("mask")), episode=episode, split=np.array(split))


def replay(learner: "OnlineLearner", transitions: Sequence[Transition], acted: bool = True) -> None:
    """Feeds logged decisions back into a fresh learner in the order the run made them, so its
    parameters, replay buffer and key equal those of the run that logged them: ``select`` then
    ``observe`` per decision when the learner itself acted (``acted``, a wave of one episode),
    ``observe`` only when episodes acted with their own explorers (a wave of several)."""
    for t in transitions:
        if acted:
            learner.select(t.obs, t.mask)
        learner.observe(t)


class OnlineLearner:
    """Online DQN training for one seed, a ``policies.Selector``: ``select`` ε-greedily at each
    decision, ``observe`` each closed transition (``dqn.schedule``); the loop around it is
    ``phases.train.dqn_loop``."""
    name = "dqn-training"

    def __init__(self, cfg: dqn.DQNConfig, seed: int):
        self.cfg, self.seed = cfg, seed
        self.state = dqn.init_state(cfg, seed)
        self.replay = dqn.init_replay(cfg)
        # since the caller last took them: the updates' losses (curves) and the checkpoints
        # reached, (decisions, θ) every ``checkpoint_every`` decisions (validated by the caller)
        self.losses: list[float] = []
        self.checkpoints: list[tuple[int, object]] = []

    @property
    def decisions(self) -> int:
        """Decisions observed so far (the schedule's d)."""
        return int(self.state.decisions)

    @property
    def done(self) -> bool:
        """Whether ``total_decisions`` have been observed."""
        return self.decisions >= self.cfg.total_decisions

    def select(self, obs: np.ndarray, mask: np.ndarray) -> policies.Choice:
        """ε-greedy with the current parameters; advances the learner's exploration key."""
        self.state, action, q = dqn.act(self.cfg, self.state, jnp.asarray(obs, jnp.float32),
                                        jnp.asarray(mask, bool), explore=True)
        return policies.Choice(int(action), np.asarray(q))

    def observe(self, transition: Transition) -> float:
        """Learns from one closed decision; returns the loss (NaN when no update happened)."""
        self.state, self.replay, loss = dqn.decision_step_jit(
            self.state, self.replay, transition.for_replay(), self.cfg)
        loss = float(loss)
        if not np.isnan(loss):
            self.losses.append(loss)
        if dqn.is_checkpoint(self.cfg, self.decisions):
            self.checkpoints.append((self.decisions, self.state.params))
        return loss
