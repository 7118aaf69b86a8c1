"""Q-network: MLP 98 → 64 → 64 → 5 with ReLU (Appendix C.1/C.2); 10,821 parameters."""
import flax.linen as nn
import jax
import jax.numpy as jnp

from countermem_jax.selector import features


class QNetwork(nn.Module):
    hidden: tuple[int, ...] = (64, 64)
    num_actions: int = features.NUM_ACTIONS

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = obs
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.num_actions)(x)


def masked_argmax(q_values: jax.Array, mask: jax.Array) -> jax.Array:
    """Greedy action among valid ones; an invalid slot is never chosen, whatever its value."""
    return jnp.argmax(jnp.where(mask, q_values, -jnp.inf), axis=-1)


def param_count(params) -> int:
    return sum(x.size for x in jax.tree_util.tree_leaves(params))
