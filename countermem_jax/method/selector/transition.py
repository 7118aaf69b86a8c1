"""One logged selector decision, the single transition type of the selector (paper Appendix C.2).

A JAX pytree: one transition, a sampled batch and a stacked log are the same type; ``task_id`` is
static metadata, and ``for_replay`` drops it and the mask so a jitted step compiles once.
"""
from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
import numpy as np


@flax.struct.dataclass
class Transition:
    """One closed selector decision (z_t, a_t, r_t, z_{t+1}, done) with its mask and task, or a
    stack of them (every array field with a leading axis)."""
    obs: jax.Array                       # [98] float32 (or [N, 98] for a stack)
    action: jax.Array                    # int32
    reward: jax.Array                    # float32, Eq. 10
    next_obs: jax.Array                  # [98] float32; zeros after the last decision
    next_mask: jax.Array                 # [5] bool; skip only after the last decision
    done: jax.Array                      # float32, 1 at the end of an episode
    mask: jax.Array | None = None        # [5] bool: the actions valid at ``obs``
    task_id: str | None = flax.struct.field(pytree_node=False, default=None)

    def for_replay(self) -> "Transition":
        """The arrays the replay buffer stores, as JAX arrays of fixed dtypes (no task id)."""
        return Transition(obs=jnp.asarray(self.obs, jnp.float32),
                          action=jnp.asarray(self.action, jnp.int32),
                          reward=jnp.asarray(self.reward, jnp.float32),
                          next_obs=jnp.asarray(self.next_obs, jnp.float32),
                          next_mask=jnp.asarray(self.next_mask, bool),
                          done=jnp.asarray(self.done, jnp.float32))

    def to_json(self) -> dict:
        """The fields of a run-log ``transition`` event (arrays as NumPy, written as lists)."""
        return {"task_id": self.task_id, "obs": self.obs, "action": self.action,
                "reward": self.reward, "next_obs": self.next_obs, "next_mask": self.next_mask,
                "done": self.done, "mask": self.mask}

    @staticmethod
    def from_json(event: dict) -> "Transition":
        """A logged decision back as host values of the dtypes the online run used."""
        return Transition(obs=np.asarray(event["obs"], np.float32), action=int(event["action"]),
                          reward=float(event["reward"]),
                          next_obs=np.asarray(event["next_obs"], np.float32),
                          next_mask=np.asarray(event["next_mask"], bool),
                          done=float(event["done"]), mask=np.asarray(event["mask"], bool),
                          task_id=event["task_id"])
