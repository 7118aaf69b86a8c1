"""Selectors behind one interface: the trained DQN and three fixed rules.

The fixed rules make the comparison the paper could not (its limitation: DQN's benefit was never
isolated against a fixed selector): ``always_skip``, ``always_top1`` and ``relevance_threshold``.
"""
import dataclasses
import functools
from typing import Protocol

import jax
import numpy as np

from countermem_jax import row_blocks
from countermem_jax.selector import dqn, features
from countermem_jax.selector.network import masked_argmax


@dataclasses.dataclass(frozen=True)
class Choice:
    action: int                     # 0 = skip, j = use retrieved slot j
    q_values: np.ndarray | None     # None for rules without a value estimate


class Selector(Protocol):
    name: str

    def select(self, obs: np.ndarray, mask: np.ndarray) -> Choice: ...


class AlwaysSkip:
    name = "always_skip"

    def select(self, obs, mask) -> Choice:
        return Choice(0, None)


class AlwaysTop1:
    name = "always_top1"

    def select(self, obs, mask) -> Choice:
        return Choice(1 if mask[1] else 0, None)


class RelevanceThreshold:
    """Use the top record when its relevance to the state reaches a threshold, else skip."""

    def __init__(self, threshold: float = 0.5):
        self.threshold = threshold
        self.name = f"relevance_threshold@{threshold:g}"

    def select(self, obs, mask) -> Choice:
        ok = mask[1] and features.relevance_of_slots(obs)[0] >= self.threshold
        return Choice(1 if ok else 0, None)


class GreedyDQN:
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
        obs = np.asarray(obs, np.float32)
        single = obs.ndim == 1
        (q,) = row_blocks.in_blocks(lambda rows: self._q(self.params, rows), self.OBS_ROWS,
                                    [obs[None] if single else obs], [0.0])
        return q[0] if single else q

    def select(self, obs, mask) -> Choice:
        q = self.q_values(obs)
        return Choice(int(masked_argmax(q, np.asarray(mask))), q)


@functools.lru_cache(maxsize=None)
def _forward_pass(cfg: dqn.DQNConfig):
    """One jitted Q-network per config, shared by every selector with it (compiled once, not
    once per seed or validated checkpoint)."""
    return jax.jit(lambda params, obs: dqn.network(cfg).apply(params, obs))


def make_fixed(name: str, threshold: float = 0.5) -> Selector:
    if name == "always_skip":
        return AlwaysSkip()
    if name == "always_top1":
        return AlwaysTop1()
    if name == "relevance_threshold":
        return RelevanceThreshold(threshold)
    raise ValueError(f"unknown fixed selector {name!r}; expected always_skip, always_top1 or "
                     "relevance_threshold")
