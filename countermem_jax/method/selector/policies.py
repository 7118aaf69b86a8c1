"""Selectors behind one interface: the online learner, the trained DQN and three fixed rules.

Module III (paper §3.4) asks its selector two things: ``select(obs, mask) -> Choice`` at each
decision, and ``observe(transition)`` once the decision's transition is closed. The online
learner learns there; the frozen ones (``GreedyDQN``, the fixed rules, ``EpisodeExplorer``)
ignore it.
"""
import dataclasses
import functools
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from countermem_jax.runtime import row_blocks
from countermem_jax.method.selector import dqn, features
from countermem_jax.method.selector.network import masked_argmax
from countermem_jax.method.selector.transition import Transition


@dataclasses.dataclass(frozen=True)
class Choice:
    """A selector's decision and, for the DQN, the Q-values it chose from."""
    action: int                     # 0 = skip, j = use retrieved slot j
    q_values: np.ndarray | None     # None for rules without a value estimate


class Selector(Protocol):
    """What Module III asks of a selector (module docstring); ``name`` goes into the logs."""
    name: str

    def select(self, obs: np.ndarray, mask: np.ndarray) -> Choice:
        """Skip (0) or a retrieved slot whose ``mask`` entry is True."""

    def observe(self, transition: Transition) -> None:
        """The decision's closed transition (reward and next observation known)."""


class Frozen:
    """A selector that does not learn: ``observe`` does nothing."""

    def observe(self, transition: Transition) -> None:
        """Nothing to learn."""
        return None


class AlwaysSkip(Frozen):
    """Never uses memory: the base agent's behaviour inside Module III."""
    name = "always_skip"

    def select(self, obs, mask) -> Choice:
        """Skip."""
        return Choice(0, None)


class AlwaysTop1(Frozen):
    """Always uses the highest-ranked record when there is one (construction's default)."""
    name = "always_top1"

    def select(self, obs, mask) -> Choice:
        """Slot 1 when it holds a record, else skip."""
        return Choice(1 if mask[1] else 0, None)


class RelevanceThreshold(Frozen):
    """Use the top record when its relevance to the state reaches a threshold, else skip."""

    def __init__(self, threshold: float = 0.5):
        self.threshold = threshold
        self.name = f"relevance_threshold@{threshold:g}"

    def select(self, obs, mask) -> Choice:
        """Slot 1 when it holds a record relevant enough, else skip."""
        ok = mask[1] and features.relevance_of_slots(obs)[0] >= self.threshold
        return Choice(1 if ok else 0, None)


class GreedyDQN(Frozen):
    """The frozen, trained selector: argmax of Q over valid actions; parameters never change.
    Observations are scored in blocks of exactly ``OBS_ROWS`` rows (``row_blocks``), so that a
    decision's Q-values are the same bit for bit whether it is scored alone or together with the
    other decisions in flight (``retrieval/batching.py``)."""
    name = "dqn"
    OBS_ROWS = 16

    def __init__(self, cfg: dqn.DQNConfig, params):
        self.cfg = cfg
        self.params = jax.device_get(params)
        self._q = _forward_pass(cfg)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """Q(z, ·) for one observation [98] or a batch [N, 98]."""
        obs = np.asarray(obs, np.float32)
        single = obs.ndim == 1
        (q,) = row_blocks.in_blocks(lambda rows: self._q(self.params, rows), self.OBS_ROWS,
                                    [obs[None] if single else obs], [0.0])
        return q[0] if single else q

    def select(self, obs, mask) -> Choice:
        """The valid action of highest Q."""
        q = self.q_values(obs)
        return Choice(int(masked_argmax(q, np.asarray(mask))), q)


class EpisodeExplorer(Frozen):
    """A training episode's ε-greedy policy in a selector wave: the wave's parameters and ε, a
    key per (seed, episode, decision), whatever the wave size (docs/concurrency.md)."""
    name = "dqn-training"

    def __init__(self, cfg: dqn.DQNConfig, params, epsilon: float, seed: int, episode: int):
        self.cfg, self.params, self.epsilon = cfg, params, jnp.float32(epsilon)
        # a key stream apart from the one of the parameters and the updates ("expl")
        self.key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), 0x6578706C),
                                      episode)
        self.decision = 0

    def select(self, obs, mask) -> Choice:
        """ε-greedy with the key of this episode's next decision."""
        key = jax.random.fold_in(self.key, self.decision)
        self.decision += 1
        action, q = dqn.explore_with_key(self.cfg, self.params, jnp.asarray(obs, jnp.float32),
                                         jnp.asarray(mask, bool), key, self.epsilon)
        return Choice(int(action), np.asarray(q))


@functools.lru_cache(maxsize=None)
def _forward_pass(cfg: dqn.DQNConfig):
    """One jitted Q-network per config, shared by every selector with it (compiled once, not
    once per seed or validated checkpoint)."""
    return jax.jit(lambda params, obs: dqn.network(cfg).apply(params, obs))


def make_fixed(name: str, threshold: float | None = None) -> Selector:
    """The fixed selector named by a config (``construction.reuse_policy``, ``eval.selector``);
    ``threshold`` is relevance_threshold's (``construction.`` / ``eval.relevance_threshold``)."""
    if name == "always_skip":
        return AlwaysSkip()
    if name == "always_top1":
        return AlwaysTop1()
    if name == "relevance_threshold":
        if threshold is None:
            raise ValueError("the relevance_threshold selector needs its threshold")
        return RelevanceThreshold(threshold)
    raise ValueError(f"unknown fixed selector {name!r}; expected always_skip, always_top1 or "
                     "relevance_threshold")
