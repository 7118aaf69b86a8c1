"""Training drivers: online (one call per real decision) and offline from a transition log.

The protocol's selector seeds are online runs (``OnlineLearner``, driven by
``phases.selector_loop.dqn_loop``): each seed acts ε-greedily in its own episodes and is validated on
real validation episodes (paper Appendix C.2). ``replay`` rebuilds a learner from its own logged
decisions after a kill, bit-identically.

Offline retraining (``train_offline``) is an analysis tool, not what a protocol seed means: it
replays one seed's logged decisions through the same ``decision_step`` with ``jax.lax.scan`` over
decisions and ``jax.vmap`` over seeds (no LLM call, no environment), so the other seeds never act
and are scored by a proxy (the first-decision value on the log's validation rows), which must
be finite.

One decision is a ``transition.Transition`` everywhere: the online learner observes it, the run
log stores it (``Transition.to_json``), ``replay`` feeds logged ones back, and
``log_from_transitions`` turns them into the ``.npz`` log that offline retraining stacks.

Transition logs are ``.npz`` files with arrays ``obs`` [N, 98] float32, ``action`` [N] int32,
``reward`` [N] float32, ``next_obs`` [N, 98], ``next_mask`` [N, 5] bool, ``done`` [N] float32,
``mask`` [N, 5] bool, ``episode`` [N] int64, and the header arrays ``obs_version`` and ``split``
([N] of "train" / "validation").
"""
import dataclasses
import functools
import os
import pathlib
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from countermem_jax.method.selector import checkpoint, dqn, features, policies
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
        """The log's rows as one stacked ``Transition`` (what ``dqn.schedule`` scans over)."""
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


@functools.partial(jax.jit, static_argnames=("cfg",), donate_argnums=(1,))
def _scan_chunk(states: dqn.TrainState, replay: dqn.Replay, chunk: dqn.Transition,
                decision_numbers: jax.Array, cfg: dqn.DQNConfig):
    """Replays logged decisions for a stack of seeds (leading axis of ``states``).

    The replay buffer holds the same logged transitions for every seed, so it is shared and
    updated in place; the schedule (update / sync) depends only on the decision number, so the
    branch stays a real ``cond`` and only the update itself is vmapped over seeds: the seeds differ
    in their initial parameters and in the batches they sample.
    """
    no_loss = jnp.full((states.step.shape[0],), jnp.nan, jnp.float32)
    update_seeds = jax.vmap(functools.partial(dqn.update, cfg=cfg), in_axes=(0, None))

    def body(carry, xs):
        transition, d = xs
        states, replay, loss = dqn.schedule(*carry, transition, d, cfg, update_seeds, no_loss)
        return (states, replay), loss

    (states, replay), losses = jax.lax.scan(body, (states, replay), (chunk, decision_numbers))
    return states, replay, losses.T


@functools.partial(jax.jit, static_argnames=("cfg",))
def _init_states(cfg: dqn.DQNConfig, seeds: jax.Array) -> dqn.TrainState:
    return jax.vmap(lambda s: dqn.init_state(cfg, s))(seeds)


def first_decision_value(cfg: dqn.DQNConfig, params, log: TransitionLog) -> float:
    """Offline validation proxy: mean over validation episodes of max valid Q at their first
    decision (the policy's own estimate of its return). Online training uses real episodes."""
    if len(log) == 0:
        return float("nan")
    _, first = np.unique(log.episode, return_index=True)
    q = np.asarray(dqn.network(cfg).apply(params, jnp.asarray(log.obs[first])))
    return float(np.where(log.mask[first], q, -np.inf).max(axis=1).mean())


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


def train_offline(cfg: dqn.DQNConfig, log: TransitionLog, seeds: Sequence[int] = (0, 1, 2, 3, 4),
                  checkpoint_dir: str | os.PathLike | None = None,
                  validate: Callable[[object], float] | None = None,
                  vectorized: bool = True) -> tuple[dqn.TrainState, np.ndarray]:
    """Analysis tool: trains one selector per seed on the log's "train" rows, in log order.

    Checkpoints every ``cfg.checkpoint_every`` decisions into ``checkpoint_dir/seed_<s>`` with the
    validation score (``validate(params)``, default the first-decision value on the log's
    "validation" rows). Returns the stacked final states and the losses [seeds, decisions].
    """
    train = log.subset("train")
    val_log = log.subset("validation")
    if validate is None and len(val_log) == 0:
        raise ValueError("the transition log has no validation rows, so the offline validation "
                         "proxy is undefined; pass validate= or a log with validation episodes")
    validate = validate or (lambda p: first_decision_value(cfg, p, val_log))
    transitions = train.transitions()
    n = len(train)
    decision_numbers = jnp.arange(1, n + 1, dtype=jnp.int32)
    ckpts = ([checkpoint.SelectorCheckpointer(pathlib.Path(checkpoint_dir) / f"seed_{s}", cfg, s)
              for s in seeds] if checkpoint_dir else [])
    groups = [tuple(seeds)] if vectorized else [(s,) for s in seeds]
    runs = [(_init_states(cfg, jnp.asarray(g)), dqn.init_replay(cfg)) for g in groups]
    losses = []
    for start in range(0, n, cfg.checkpoint_every):
        window = slice(start, start + cfg.checkpoint_every)
        chunk = jax.tree_util.tree_map(lambda x: x[window], transitions)
        outs = [_scan_chunk(st, rp, chunk, decision_numbers[window], cfg) for st, rp in runs]
        runs = [(st, rp) for st, rp, _ in outs]
        states = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *[st for st, _ in runs])
        losses.append(np.concatenate([np.asarray(lo) for _, _, lo in outs]))
        for i, ckpt in enumerate(ckpts):
            params = jax.tree_util.tree_map(lambda x: x[i], states.params)
            ckpt.save(min(start + cfg.checkpoint_every, n), params, validate(params))
    for ckpt in ckpts:
        ckpt.close()
    if n == 0:
        states = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *[st for st, _ in runs])
    return states, np.concatenate(losses, axis=1) if losses else np.zeros((len(seeds), 0))


class OnlineLearner:
    """Online DQN training for one seed, a ``policies.Selector``: ``select`` ε-greedily at each
    decision, ``observe`` each closed transition (``dqn.schedule``); the loop around it is
    ``phases.selector_loop.dqn_loop``."""
    name = "dqn-training"

    def __init__(self, cfg: dqn.DQNConfig, seed: int):
        self.cfg, self.seed = cfg, seed
        self.state = dqn.init_state(cfg, seed)
        self.replay = dqn.init_replay(cfg)
        self.losses: list[float] = []  # of the updates since the caller last took them (curves)

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
        return loss
