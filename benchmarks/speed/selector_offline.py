"""Offline retraining of the selector (paper Appendix C.2) for the speed benchmarks
(``selector.py``, ``device_check.py``) and the analysis of a seed's transition log.

``train_offline`` replays one logged decision stream through ``dqn.schedule`` with
``jax.lax.scan`` over decisions and ``jax.vmap`` over seeds (no LLM call, no environment). It is
not what a protocol seed means (that is ``phases.train.dqn_loop``): the other seeds never act and
are scored by a proxy, the first-decision value on the log's validation rows.
"""
import functools
import os
import pathlib
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from countermem_jax.method.selector import checkpoint, dqn, features, training


def synthetic_log(n: int, seed: int = 0) -> training.TransitionLog:
    """``n`` random decisions shaped like the selector's (§3.3: 98-d observations, 5 actions with
    skip always valid, 3-decision episodes), all in the "train" split: the speed of training does
    not depend on what the numbers mean."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, features.NUM_ACTIONS)) < 0.7
    mask[:, 0] = True
    action = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int32)
    return training.TransitionLog(
        obs=rng.normal(size=(n, features.OBS_DIM)).astype(np.float32), action=action,
        reward=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, features.OBS_DIM)).astype(np.float32),
        next_mask=np.roll(mask, -1, 0), done=(np.arange(n) % 3 == 2).astype(np.float32), mask=mask,
        episode=np.arange(n) // 3, split=np.full(n, "train"))


@functools.partial(jax.jit, static_argnames=("cfg",), donate_argnums=(1,))
def _scan_chunk(states: dqn.TrainState, replay: dqn.Replay, chunk: dqn.Transition,
                decision_numbers: jax.Array, cfg: dqn.DQNConfig):
    """Replays logged decisions for a stack of seeds (leading axis of ``states``).

    The replay buffer holds the same logged transitions for every seed, so it is shared (not
    mapped) and updated in place; the decision number is shared too, so the schedule's update
    stays a real ``cond``: the seeds differ in their initial parameters and sampled batches.
    """
    step = jax.vmap(functools.partial(dqn.schedule, cfg=cfg), in_axes=(0, None, None, None),
                    out_axes=(0, None, 0))

    def body(carry, xs):
        states, replay, loss = step(*carry, *xs)
        return (states, replay), loss

    (states, replay), losses = jax.lax.scan(body, (states, replay), (chunk, decision_numbers))
    return states, replay, losses.T


@functools.partial(jax.jit, static_argnames=("cfg",))
def _init_states(cfg: dqn.DQNConfig, seeds: jax.Array) -> dqn.TrainState:
    return jax.vmap(lambda s: dqn.init_state(cfg, s))(seeds)


def first_decision_value(cfg: dqn.DQNConfig, params, log: training.TransitionLog) -> float:
    """Offline validation proxy: mean over validation episodes of max valid Q at their first
    decision (the policy's own estimate of its return). Online training uses real episodes."""
    if len(log) == 0:
        return float("nan")
    _, first = np.unique(log.episode, return_index=True)
    q = np.asarray(dqn.network(cfg).apply(params, jnp.asarray(log.obs[first])))
    return float(np.where(log.mask[first], q, -np.inf).max(axis=1).mean())


def train_offline(cfg: dqn.DQNConfig, log: training.TransitionLog,
                  seeds: Sequence[int] = (0, 1, 2, 3, 4),
                  checkpoint_dir: str | os.PathLike | None = None,
                  validate: Callable[[object], float] | None = None,
                  vectorized: bool = True) -> tuple[dqn.TrainState, np.ndarray]:
    """Trains one selector per seed on the log's "train" rows, in log order.

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
