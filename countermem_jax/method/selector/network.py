"""Q-network: MLP 98 → 64 → 64 → 5 with ReLU (Appendix C.1/C.2); 10,821 parameters."""
import flax.linen as nn
import jax
import jax.numpy as jnp

from countermem_jax.method.selector import features


class QNetwork(nn.Module):
    """Q_θ(z, ·): one value per memory-use choice for an observation z_t (Eq. 9, Eq. 11).

    ``hidden`` are the hidden widths (paper: 64, 64); ``num_actions`` is 1 + L. Works on a single
    observation or any leading batch shape; the mask is applied by the caller, not here.
    """
    hidden: tuple[int, ...] = (64, 64)
    num_actions: int = features.NUM_ACTIONS

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = obs
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.num_actions)(x)


def masked_argmax(q_values: jax.Array, mask: jax.Array) -> jax.Array:
    """Greedy action among valid ones; an invalid slot is never chosen, whatever its value.

    ``mask`` is True for skip (always) and for each slot holding a retrieved record; this is the
    evaluation rule j_t = argmax over J_t of Q_θ(z_t, j) (Appendix C.2).
    """
    return jnp.argmax(jnp.where(mask, q_values, -jnp.inf), axis=-1)


def param_count(params) -> int:
    """Total number of scalars in a parameter tree (10,821 for the paper's network)."""
    return sum(x.size for x in jax.tree_util.tree_leaves(params))
