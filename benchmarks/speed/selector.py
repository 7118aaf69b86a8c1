"""Selector training speed: jitted JAX DQN vs a straightforward PyTorch DQN, same transitions.

    python -m benchmarks.speed.selector [--decisions=2000]

Prints compile time, update steps/s, and the wall time of a full training (one seed, and five
seeds vmapped) for both. Goals: five vmapped seeds ≤ 2× one seed; the JAX update ≥ 2×
faster than the PyTorch update. The PyTorch comparison needs the ``bench`` extra (torch); without
it the JAX figures are still printed, with a note saying how to enable the comparison.
"""
import dataclasses
import time

import jax
import numpy as np
from absl import app, flags

from benchmarks.common import best_time, optional_module, print_result
from countermem_jax.method.selector import dqn, features, training
from countermem_jax.phases import context
from countermem_jax.protocol import config_files
from benchmarks.speed.selector_offline import synthetic_log, train_offline

_DECISIONS = flags.DEFINE_integer("decisions", 2000, "Logged decisions to train on.")


def _train(cfg: dqn.DQNConfig, log: training.TransitionLog, seeds: tuple) -> object:
    """Offline training as timed here: no checkpoints are written, so no validation score is
    computed (the synthetic log has only "train" rows)."""
    return train_offline(cfg, log, seeds=seeds, validate=lambda params: float("nan"))


class TorchDQN:
    """The same DQN written the usual PyTorch way: Python loop, numpy replay, one update a call."""

    def __init__(self, cfg: dqn.DQNConfig, seed: int):
        import torch
        self.torch, self.cfg = torch, cfg
        torch.manual_seed(seed)
        layers, width = [], features.OBS_DIM
        for h in cfg.hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        self.q = torch.nn.Sequential(*layers, torch.nn.Linear(width, features.NUM_ACTIONS))
        # The target network: the same layers, fresh, then loaded with q's weights.
        self.target = torch.nn.Sequential(*[type(m)(*([m.in_features, m.out_features])
                                            if isinstance(m, torch.nn.Linear) else []) for m in self.q])
        self.target.load_state_dict(self.q.state_dict())
        self.opt = torch.optim.Adam(self.q.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps)
        self.rng = np.random.default_rng(seed)

    def update(self, obs, action, reward, next_obs, next_mask, done):
        """One gradient step on a batch: the target of Eq. 12 with invalid next actions masked, and
        the squared TD loss of Eq. 13. Returns the loss tensor.
        """
        torch = self.torch
        with torch.no_grad():
            q_next = self.target(next_obs).masked_fill(~next_mask, -float("inf")).max(1).values
            y = reward + self.cfg.gamma * (1 - done) * q_next
        q = self.q(obs).gather(1, action[:, None])[:, 0]
        loss = ((y - q) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss

    def train(self, log: training.TransitionLog) -> None:
        """The DQN schedule of Appendix C.2 over the logged decisions: an update every ``train_every``
        decisions after ``learning_starts``, target sync every ``target_sync_every``; uniform
        replay over the decisions seen so far.
        """
        torch, cfg = self.torch, self.cfg
        arrays = {k: torch.as_tensor(getattr(log, k)) for k in
                  ("obs", "action", "reward", "next_obs", "next_mask", "done")}
        arrays["action"] = arrays["action"].long()
        for d in range(1, len(log) + 1):
            if d > cfg.learning_starts and d % cfg.train_every == 0:
                idx = torch.as_tensor(self.rng.integers(0, min(d, cfg.replay_capacity),
                                                        cfg.batch_size))
                self.update(*(arrays[k][idx] for k in ("obs", "action", "reward", "next_obs",
                                                        "next_mask", "done")))
            if d % cfg.target_sync_every == 0:
                self.target.load_state_dict(self.q.state_dict())


def torch_figures(torch, cfg: dqn.DQNConfig, log: training.TransitionLog, jax_one: float,
                  jax_update: float, jax_update_call: float) -> dict:
    """The PyTorch side of the comparison: update steps/s and one full training, as ratios to the
    JAX figures measured in the same run."""
    torch_dqn = TorchDQN(cfg, 0)
    b = {k: torch.as_tensor(getattr(log, k)[:32]) for k in
         ("obs", "action", "reward", "next_obs", "next_mask", "done")}
    b["action"] = b["action"].long()
    args = [b[k] for k in ("obs", "action", "reward", "next_obs", "next_mask", "done")]
    torch_update = best_time(lambda: torch_dqn.update(*args), 5, 200)
    torch_one = best_time(lambda: TorchDQN(cfg, 0).train(log), 3)
    return {"torch_update_steps_per_s": 1 / torch_update,
            "update_call_speedup_jax_over_torch": torch_update / jax_update_call,
            "update_speedup_jax_over_torch": torch_update / jax_update,
            "torch_train_1seed_s": torch_one, "train_speedup_jax_over_torch": torch_one / jax_one,
            "torch_threads": torch.get_num_threads()}


def main(argv):
    """Times JAX compile, one-seed and five-seed (vmapped) training and the update step, then
    the PyTorch side if torch is installed; prints every figure and the ``result:`` line.
    """
    del argv
    n = _DECISIONS.value
    cfg = dataclasses.replace(context.method_config(config_files.load("configs/default.py")).dqn, total_decisions=n, checkpoint_every=n)
    log = synthetic_log(n)
    updates = len([d for d in range(1, n + 1) if d > cfg.learning_starts and d % cfg.train_every == 0])
    result = {"decisions": n, "updates": updates, "device": jax.devices()[0].platform}

    start = time.perf_counter()
    # The first calls include tracing and XLA compilation, reported apart from the
    # steady-state times measured next.
    jax.block_until_ready(_train(cfg, log, (0,)))
    result["jax_compile_and_first_run_s"] = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(_train(cfg, log, (0, 1, 2, 3, 4)))
    result["jax_compile_and_first_run_5seeds_s"] = time.perf_counter() - start
    one = best_time(lambda: jax.block_until_ready(_train(cfg, log, (0,))), 3)
    five = best_time(lambda: jax.block_until_ready(_train(cfg, log, (0, 1, 2, 3, 4))), 3)

    state, replay = dqn.init_state(cfg, 0), dqn.init_replay(cfg)
    # Fill the replay with real transitions so the timed update samples real batches.
    for t in range(200):
        replay = dqn.replay_add(replay, jax.tree_util.tree_map(lambda x: x[t], log.transitions()))
    update = jax.jit(dqn.update, static_argnames=("cfg",))
    jax.block_until_ready(update(state, replay, cfg))
    jax_update_call = best_time(lambda: jax.block_until_ready(update(state, replay, cfg)), 5, 200)
    # How training runs it: many updates inside one compiled loop (no Python dispatch per step).
    loop = jax.jit(lambda s, r: jax.lax.fori_loop(0, 100, lambda i, x: dqn.update(x, r, cfg)[0], s))
    jax.block_until_ready(loop(state, replay))
    jax_update = best_time(lambda: jax.block_until_ready(loop(state, replay)), 5) / 100

    result.update({"jax_train_1seed_s": one, "jax_train_5seeds_vmapped_s": five,
                   "five_over_one": five / one, "jax_update_steps_per_s": 1 / jax_update,
                   "jax_update_python_call_steps_per_s": 1 / jax_update_call})
    torch = optional_module("torch", extra="bench", what="the PyTorch comparison")
    if torch is not None:
        result.update(torch_figures(torch, cfg, log, one, jax_update, jax_update_call))
    print(f"{n} decisions, {updates} updates")
    print(f"JAX compile + first run: {result['jax_compile_and_first_run_s']:.2f} s (1 seed), "
          f"{result['jax_compile_and_first_run_5seeds_s']:.2f} s (5 seeds)")
    print(f"JAX update: {1 / jax_update:,.0f} steps/s in a compiled loop, "
          f"{1 / jax_update_call:,.0f} steps/s one Python call each")
    print(f"full training, 1 seed: JAX {one * 1e3:.1f} ms; 5 seeds vmapped: {five * 1e3:.1f} ms "
          f"= ×{five / one:.2f} of one seed (goal ≤ 2)")
    if torch is not None:
        print(f"PyTorch update: {result['torch_update_steps_per_s']:,.0f} steps/s; ratio "
              f"×{result['update_speedup_jax_over_torch']:.1f} "
              f"(×{result['update_call_speedup_jax_over_torch']:.1f} per call) (goal ≥ 2); "
              f"full training, 1 seed: PyTorch {result['torch_train_1seed_s'] * 1e3:.1f} ms "
              f"(×{result['train_speedup_jax_over_torch']:.1f} slower than JAX)")
    print_result(result)


if __name__ == "__main__":
    app.run(main)
