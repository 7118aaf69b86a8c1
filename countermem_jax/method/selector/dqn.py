"""DQN for memory use (paper Appendix C.2): pure loss, one jitted decision step, explicit state.

After each logged decision d (1-based) the learner adds the transition to the replay buffer; takes
one Adam step on ``batch_size`` transitions when d > learning_starts and d % train_every == 0;
copies θ to θ⁻ when d % target_sync_every == 0; and (on the host) checkpoints when
d % checkpoint_every == 0. ``schedule`` is that rule, written once; ``decision_step`` applies it
to one seed, ``jax.vmap`` to a stack of seeds sharing d.
"""
import dataclasses
import functools

import chex
import flax
import jax
import jax.numpy as jnp
import optax

from countermem_jax.method.selector import features
from countermem_jax.method.selector.network import QNetwork, masked_argmax
from countermem_jax.method.selector.transition import Transition


@dataclasses.dataclass(frozen=True)
class DQNConfig:
    """The DQN configuration (Appendix C.2, Table 3, and the reward of Eq. 10), from the config's
    ``selector`` schedule, ``selector.dqn`` and ``selector.reward`` (``phases.context``); the
    paper's values are stated there."""
    total_decisions: int
    hidden: tuple[int, ...]
    learning_rate: float
    adam_eps: float
    gamma: float
    replay_capacity: int
    batch_size: int
    learning_starts: int
    train_every: int
    target_sync_every: int
    epsilon_start: float
    epsilon_end: float
    exploration_fraction: float  # ε reaches its end value after this fraction of training
    checkpoint_every: int
    # Reward (Eq. 10): r = 1[t=T]·1[solved] − λ_w·Δcalls − λ_f·Δfailures − λ_τ·Δtokens/τ_0
    call_penalty: float
    failure_penalty: float
    token_penalty: float
    token_scale: float

    def __post_init__(self):
        # hashable (a static argument of the jitted steps) whatever sequence a config gave
        object.__setattr__(self, "hidden", tuple(int(w) for w in self.hidden))

    def to_json(self) -> dict:
        """The config as checkpoint metadata."""
        d = dataclasses.asdict(self)
        d["hidden"] = list(self.hidden)
        return d

    @staticmethod
    def from_json(d: dict) -> "DQNConfig":
        """The config a checkpoint was trained with."""
        d = dict(d)
        d["hidden"] = tuple(d["hidden"])
        return DQNConfig(**d)


def reward(cfg: DQNConfig, *, final: bool, solved: bool, calls: int, failures: int,
           tokens: int) -> float:
    """r_t of Eq. 10 for one decision's cost increments."""
    return (float(final and solved) - cfg.call_penalty * calls - cfg.failure_penalty * failures
            - cfg.token_penalty * tokens / cfg.token_scale)


@flax.struct.dataclass
class TrainState:
    """One seed's learner: θ, θ⁻, Adam state, counters and the key chain."""
    params: chex.ArrayTree
    target_params: chex.ArrayTree
    opt_state: chex.ArrayTree
    step: jax.Array          # gradient updates taken
    decisions: jax.Array     # decisions observed
    rng: jax.Array


@flax.struct.dataclass
class Replay:
    """The replay buffer (``replay_capacity`` transitions, Table 3) as fixed-size arrays and a
    ring pointer."""
    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    next_obs: jax.Array
    next_mask: jax.Array
    done: jax.Array
    size: jax.Array
    ptr: jax.Array


def network(cfg: DQNConfig) -> QNetwork:
    """The Q-network of Appendix C.2 (98 → 64 → 64 → 5)."""
    return QNetwork(hidden=tuple(cfg.hidden))


def optimizer(cfg: DQNConfig) -> optax.GradientTransformation:
    """Adam with Table 3's learning rate and ε."""
    return optax.adam(cfg.learning_rate, eps=cfg.adam_eps)


def init_state(cfg: DQNConfig, seed: int | jax.Array) -> TrainState:
    """A seed's initial parameters (θ⁻ = θ) and key chain."""
    init_rng, rng = jax.random.split(jax.random.PRNGKey(seed))
    params = network(cfg).init(init_rng, jnp.zeros((1, features.OBS_DIM), jnp.float32))
    return TrainState(params=params, target_params=params,
                      opt_state=optimizer(cfg).init(params), step=jnp.zeros((), jnp.int32),
                      decisions=jnp.zeros((), jnp.int32), rng=rng)


def init_replay(cfg: DQNConfig) -> Replay:
    """An empty replay buffer."""
    c = cfg.replay_capacity
    return Replay(obs=jnp.zeros((c, features.OBS_DIM), jnp.float32),
                  action=jnp.zeros((c,), jnp.int32), reward=jnp.zeros((c,), jnp.float32),
                  next_obs=jnp.zeros((c, features.OBS_DIM), jnp.float32),
                  next_mask=jnp.zeros((c, features.NUM_ACTIONS), bool),
                  done=jnp.zeros((c,), jnp.float32), size=jnp.zeros((), jnp.int32),
                  ptr=jnp.zeros((), jnp.int32))


def replay_add(replay: Replay, t: Transition) -> Replay:
    """Stores one transition, overwriting the oldest when full."""
    i = replay.ptr
    capacity = replay.action.shape[0]
    return Replay(obs=replay.obs.at[i].set(t.obs), action=replay.action.at[i].set(t.action),
                  reward=replay.reward.at[i].set(t.reward),
                  next_obs=replay.next_obs.at[i].set(t.next_obs),
                  next_mask=replay.next_mask.at[i].set(t.next_mask),
                  done=replay.done.at[i].set(t.done),
                  size=jnp.minimum(replay.size + 1, capacity), ptr=(i + 1) % capacity)


def replay_sample(replay: Replay, rng: jax.Array, batch_size: int) -> Transition:
    """A uniform batch (with replacement) of the stored transitions."""
    idx = jax.random.randint(rng, (batch_size,), 0, jnp.maximum(replay.size, 1))
    return Transition(obs=replay.obs[idx], action=replay.action[idx], reward=replay.reward[idx],
                      next_obs=replay.next_obs[idx], next_mask=replay.next_mask[idx],
                      done=replay.done[idx])


def td_targets(cfg: DQNConfig, target_params, batch: Transition) -> jax.Array:
    """y = r + γ(1 − d)·max over *valid* next actions of Q_target(z', ·)."""
    q_next = network(cfg).apply(target_params, batch.next_obs)
    best_next = jnp.max(jnp.where(batch.next_mask, q_next, -jnp.inf), axis=-1)
    best_next = jnp.where(jnp.any(batch.next_mask, axis=-1), best_next, 0.0)
    return batch.reward + cfg.gamma * (1.0 - batch.done) * best_next


def loss_fn(params, target_params, batch: Transition, cfg: DQNConfig) -> jax.Array:
    """Mean squared TD error (Eq. 13) against the target of Eq. 12, held fixed."""
    chex.assert_rank([batch.obs, batch.action, batch.reward, batch.next_mask], [2, 1, 1, 2])
    chex.assert_type([batch.action, batch.reward], [jnp.int32, jnp.float32])
    q = network(cfg).apply(params, batch.obs)
    q_taken = jnp.take_along_axis(q, batch.action[:, None], axis=1)[:, 0]
    y = jax.lax.stop_gradient(td_targets(cfg, target_params, batch))
    return jnp.mean((y - q_taken) ** 2)


def update(state: TrainState, replay: Replay, cfg: DQNConfig) -> tuple[TrainState, jax.Array]:
    """One Adam step on a sampled batch."""
    rng, sample_rng = jax.random.split(state.rng)
    batch = replay_sample(replay, sample_rng, cfg.batch_size)
    loss, grads = jax.value_and_grad(loss_fn)(state.params, state.target_params, batch, cfg)
    updates, opt_state = optimizer(cfg).update(grads, state.opt_state, state.params)
    return state.replace(params=optax.apply_updates(state.params, updates), opt_state=opt_state,
                         step=state.step + 1, rng=rng), loss


def schedule(state: TrainState, replay: Replay, transition: Transition, d: jax.Array,
             cfg: DQNConfig) -> tuple[TrainState, Replay, jax.Array]:
    """The learning schedule for decision number ``d`` (1-based), the one copy of it.

    Adds the transition, counts the decision, takes an update when d > learning_starts and
    d % train_every == 0 and copies θ to θ⁻ when d % target_sync_every == 0. Returns the loss
    (NaN when no update happened).
    """
    replay = replay_add(replay, transition)
    state = state.replace(decisions=state.decisions + 1)
    do_update = (d > cfg.learning_starts) & (d % cfg.train_every == 0)
    state, loss = jax.lax.cond(do_update, lambda s: update(s, replay, cfg),
                               lambda s: (s, jnp.float32(jnp.nan)), state)
    sync = d % cfg.target_sync_every == 0
    target = jax.tree_util.tree_map(lambda p, t: jnp.where(sync, p, t), state.params,
                                    state.target_params)
    return state.replace(target_params=target), replay, loss


def is_checkpoint(cfg: DQNConfig, decisions: int) -> bool:
    """Whether the learner checkpoints (and validates) after its ``decisions``-th decision."""
    return decisions % cfg.checkpoint_every == 0


def decision_step(state: TrainState, replay: Replay, transition: Transition,
                  cfg: DQNConfig) -> tuple[TrainState, Replay, jax.Array]:
    """Learns from one more decision of one seed (``schedule``). Returns the loss (NaN when no
    update happened)."""
    return schedule(state, replay, transition, state.decisions + 1, cfg)


decision_step_jit = jax.jit(decision_step, static_argnames=("cfg",), donate_argnums=(1,))


def epsilon(cfg: DQNConfig, decisions: int | jax.Array) -> jax.Array:
    """Linear ε from ``epsilon_start`` at decision 0 to ``epsilon_end`` after the exploration
    fraction of training, constant after."""
    horizon = max(cfg.exploration_fraction * cfg.total_decisions, 1.0)
    frac = jnp.clip(jnp.asarray(decisions, jnp.float32) / horizon, 0.0, 1.0)
    return cfg.epsilon_start + frac * (cfg.epsilon_end - cfg.epsilon_start)


@functools.partial(jax.jit, static_argnames=("cfg",))
def q_values(cfg: DQNConfig, params, obs: jax.Array) -> jax.Array:
    """Q(z, ·) for a batch of observations (jitted: the training curves ask for it after
    every episode)."""
    return network(cfg).apply(params, obs)


@jax.jit
def _explore(rng: jax.Array, q: jax.Array, mask: jax.Array, eps: jax.Array) -> jax.Array:
    explore_rng, pick_rng = jax.random.split(rng)
    greedy = masked_argmax(q, mask)
    random_valid = jax.random.categorical(pick_rng, jnp.where(mask, 0.0, -jnp.inf))
    return jnp.where(jax.random.uniform(explore_rng) < eps, random_valid, greedy)


def act(cfg: DQNConfig, state: TrainState, obs: jax.Array, mask: jax.Array,
        explore: bool) -> tuple[TrainState, jax.Array, jax.Array]:
    """ε-greedy (training) or greedy (evaluation) choice among valid actions.

    Returns the new state (its rng advanced), the action and the Q-values.
    """
    if not explore:
        q = q_values(cfg, state.params, obs[None])[0]
        return state, masked_argmax(q, mask), q
    rng, key = jax.random.split(state.rng)
    action, q = explore_with_key(cfg, state.params, obs, mask, key, epsilon(cfg, state.decisions))
    return state.replace(rng=rng), action, q


def explore_with_key(cfg: DQNConfig, params, obs: jax.Array, mask: jax.Array, key: jax.Array,
                     eps: jax.Array) -> tuple[jax.Array, jax.Array]:
    """ε-greedy choice among valid actions with an explicit key; returns (action, Q-values)."""
    q = q_values(cfg, params, obs[None])[0]
    return _explore(key, q, mask, eps), q


