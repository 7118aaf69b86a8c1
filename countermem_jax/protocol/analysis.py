"""Notebook helpers: load a trained selector and look at its Q-values and choices."""
import dataclasses
import os

import numpy as np

from countermem_jax.method.selector import checkpoint, dqn, features, policies


@dataclasses.dataclass
class LoadedSelector:
    """A restored selector checkpoint with numpy-friendly accessors, for notebooks.

    ``metadata`` is what the checkpoint recorded (seed, decisions, validation return,
    observation layout); ``policy`` is the greedy policy used at evaluation, so the Q-values seen
    here are exactly those that chose records in the evaluation runs.
    """
    config: dqn.DQNConfig
    metadata: dict
    policy: policies.GreedyDQN

    @property
    def params(self):
        """The network parameters (a Flax parameter tree)."""
        return self.policy.params

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """Q-values for one observation [98] or a batch [n, 98]."""
        return self.policy.q_values(obs)

    def actions(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Greedy valid actions (0 = skip) for observations and their masks."""
        q = np.atleast_2d(self.q_values(obs))
        # Invalid slots (beyond the retrieved records) get -inf, so they are never the argmax.
        masked = np.where(np.atleast_2d(mask), q, -np.inf)
        out = masked.argmax(axis=-1)
        return out if np.ndim(obs) == 2 else out[0]

    def describe(self) -> str:
        """One line: seed, training decisions, validation return, observation layout."""
        m = self.metadata
        return (f"DQN selector seed {m['seed']} after {m['decisions']} decisions, validation return "
                f"{m['val_return']:.3f}; observation v{m['obs_version']} ({m['obs_dim']} dims), "
                f"{features.NUM_ACTIONS} actions")


def load_selector(checkpoint_dir: str | os.PathLike, step: int | str = "best") -> LoadedSelector:
    """Restores a selector checkpoint (best by validation return unless ``step`` says otherwise)."""
    params, meta = checkpoint.restore(checkpoint_dir, step)
    cfg = dqn.DQNConfig.from_json(meta["config"])
    return LoadedSelector(cfg, meta, policies.GreedyDQN(cfg, params))
