"""The DQN memory-use selector (paper Appendix C)."""
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from countermem_jax.protocol.analysis import load_selector
from countermem_jax.method.retrieval.retrieve import Candidate
from countermem_jax.method.selector import checkpoint, dqn, features, policies, training
from countermem_jax.method.selector.network import masked_argmax, param_count
from countermem_jax.method.selector.transition import Transition
from benchmarks.speed.selector_offline import train_offline
from helpers import make_record, paper

CFG = paper("dqn")


def _budget(**kw):
    base = dict(calls_used=1, call_budget=4, tokens_used=500, token_budget=10000, decision_index=1,
                max_decisions=4, failures=1, last_utility=0.0)
    base.update(kw)
    return features.BudgetState(**base)


def test_network_has_10821_parameters():
    assert param_count(dqn.init_state(CFG, 0).params) == 10_821


def test_observation_layout_and_masks():
    cands = [Candidate(dataclasses.replace(make_record(source_task_id=f"s{i}", uses=4, helpful=3),
                                           admission_score=1.0), 0.9 - i / 10, 0.8 - i / 10, i)
             for i in range(3)]
    obs, mask = features.build_observation(np.ones(512, np.float32) / np.sqrt(512),
                                           np.zeros(512, np.float32), cands, _budget())
    assert obs.shape == (98,) and obs.dtype == np.float32
    assert mask.tolist() == [True, True, True, True, False]  # k = 3: the fourth slot is masked
    slot0 = obs[features.SLOT_OFFSET:features.SLOT_OFFSET + 7]
    np.testing.assert_allclose(slot0, [0.8, 1 / 1.5, 1.0, 0.0, np.log1p(4) / np.log1p(100), 0.75,
                                       1.0], rtol=1e-6)
    assert not obs[features.SLOT_OFFSET + 21:features.BUDGET_OFFSET].any()  # zero-padded slot 4
    np.testing.assert_allclose(obs[features.BUDGET_OFFSET:], [0.75, 0.95, 0.25, 0.25, 0.0, 1.0])
    assert not obs[32:64].any()  # the draft's projection of a zero embedding


def test_no_records_means_skip_only():
    obs, mask = features.build_observation(np.zeros(512), np.zeros(512), [], _budget())
    assert mask.tolist() == [True, False, False, False, False]
    state = dqn.init_state(CFG, 0)
    for _ in range(50):
        state, action, _ = dqn.act(CFG, state, jnp.asarray(obs), jnp.asarray(mask), explore=True)
        assert int(action) == 0


def test_masked_argmax_never_picks_masked_slot_even_with_extreme_values():
    q = jnp.array([-1e30, 1e30, jnp.inf, 3e38, 1e9])
    assert int(masked_argmax(q, jnp.array([True, False, False, False, False]))) == 0
    assert int(masked_argmax(q, jnp.array([True, False, False, False, True]))) == 4
    rng = np.random.default_rng(0)
    for _ in range(200):
        qv = rng.normal(scale=1e6, size=5)
        mask = rng.random(5) < 0.5
        mask[0] = True
        assert mask[int(masked_argmax(jnp.asarray(qv), jnp.asarray(mask)))]


def test_exploration_only_picks_valid_actions():
    mask = jnp.array([True, True, False, True, False])
    picks = {int(dqn._explore(jax.random.PRNGKey(i), jnp.arange(5.0), mask, jnp.float32(1.0)))
             for i in range(300)}
    assert picks == {0, 1, 3}


def test_terminal_targets_equal_reward():
    batch = dqn.Transition(obs=jnp.zeros((4, 98)), action=jnp.zeros(4, jnp.int32),
                           reward=jnp.array([1.0, -0.15, 0.3, -0.4]),
                           next_obs=jnp.ones((4, 98)) * 5, next_mask=jnp.ones((4, 5), bool),
                           done=jnp.ones(4))
    y = dqn.td_targets(CFG, dqn.init_state(CFG, 0).params, batch)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(batch.reward))
    not_done = batch.replace(done=jnp.zeros(4), next_mask=jnp.array([[True] + [False] * 4] * 4))
    q0 = dqn.network(CFG).apply(dqn.init_state(CFG, 0).params, not_done.next_obs)[:, 0]
    np.testing.assert_allclose(dqn.td_targets(CFG, dqn.init_state(CFG, 0).params, not_done),
                               not_done.reward + 0.95 * q0, rtol=1e-6)


def _random_transition(rng):
    mask = rng.random(5) < 0.6
    mask[0] = True
    return dqn.Transition(obs=jnp.asarray(rng.normal(size=98), jnp.float32),
                          action=jnp.int32(0), reward=jnp.float32(rng.normal()),
                          next_obs=jnp.asarray(rng.normal(size=98), jnp.float32),
                          next_mask=jnp.asarray(mask), done=jnp.float32(rng.random() < 0.3))


def test_target_network_changes_only_at_sync_steps():
    rng = np.random.default_rng(0)
    state, replay = dqn.init_state(CFG, 0), dqn.init_replay(CFG)
    flat = lambda p: np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(p)])
    previous = flat(state.target_params)
    changes = []
    for d in range(1, 551):
        state, replay, _ = dqn.decision_step_jit(state, replay, _random_transition(rng), CFG)
        target = flat(state.target_params)
        if not np.array_equal(target, previous):
            changes.append(d)
            np.testing.assert_array_equal(target, flat(state.params))
        previous = target
    assert changes == [250, 500]
    assert int(state.step) == len([d for d in range(1, 551) if d > 100 and d % 4 == 0])


def test_epsilon_schedule_endpoints():
    assert float(dqn.epsilon(CFG, 0)) == pytest.approx(0.30)
    assert float(dqn.epsilon(CFG, 1000)) == pytest.approx(0.175)
    assert float(dqn.epsilon(CFG, 2000)) == pytest.approx(0.05)
    assert float(dqn.epsilon(CFG, 10_000)) == pytest.approx(0.05)


def _bandit_context(rng):
    """Slots 1-3 hold records; slot 2 helps exactly when its helpful-use feature is 1."""
    obs = np.zeros(98, np.float32)
    obs[:64] = rng.normal(scale=0.3, size=64)
    helpful = float(rng.random() < 0.5)
    for j in range(3):
        start = features.SLOT_OFFSET + j * 7
        obs[start:start + 7] = [rng.uniform(0.2, 0.9), rng.uniform(0, 1), 1.0,
                                rng.uniform(-0.5, 0.5), rng.uniform(0, 1), rng.uniform(0, 1), 1.0]
    obs[features.SLOT_OFFSET + 7 + 5] = helpful
    obs[features.BUDGET_OFFSET:] = rng.uniform(0, 1, 6)
    return obs, np.array([True, True, True, True, False]), helpful


def _bandit_reward(action, helpful):
    if action == 0:
        return 0.0
    return 1.0 - 0.15 if (action == 2 and helpful) else -0.15 - 0.25


def test_learns_contextual_bandit():
    rng = np.random.default_rng(1)
    learner = training.OnlineLearner(CFG, seed=0)
    while not learner.done:
        obs, mask, helpful = _bandit_context(rng)
        action = learner.select(obs, mask).action
        assert mask[action]
        learner.observe(Transition(obs=obs, action=action, reward=_bandit_reward(action, helpful),
                                   next_obs=obs, next_mask=mask, done=1.0, mask=mask))
    greedy = policies.GreedyDQN(CFG, learner.state.params)
    optimal = 0
    for _ in range(500):
        obs, mask, helpful = _bandit_context(rng)
        optimal += greedy.select(obs, mask).action == (2 if helpful else 0)
    assert optimal / 500 >= 0.9


def test_orbax_round_trip_gives_identical_q_values(tmp_path):
    state = dqn.init_state(CFG, 3)
    ckpt = checkpoint.SelectorCheckpointer(tmp_path / "sel", CFG, seed=3)
    for decisions, ret in [(250, 0.1), (500, 0.7), (750, 0.2)]:
        params = jax.tree_util.tree_map(lambda x: x * (decisions / 500), state.params)
        ckpt.save(decisions, params, ret)
    ckpt.close()
    assert json.loads((tmp_path / "sel" / "best.json").read_text())["best_step"] == 500
    sel = load_selector(tmp_path / "sel")
    assert sel.metadata["decisions"] == 500 and sel.metadata["seed"] == 3
    obs = np.random.default_rng(0).normal(size=(16, 98)).astype(np.float32)
    expected = np.asarray(dqn.network(CFG).apply(state.params, obs))
    np.testing.assert_array_equal(sel.q_values(obs), expected)
    mask = np.ones((16, 5), bool)
    np.testing.assert_array_equal(sel.actions(obs, mask), expected.argmax(1))
    assert "seed 3" in sel.describe()


def test_incompatible_checkpoint_is_refused(tmp_path, monkeypatch):
    ckpt = checkpoint.SelectorCheckpointer(tmp_path / "sel", CFG, seed=0)
    ckpt.save(250, dqn.init_state(CFG, 0).params, 0.0)
    ckpt.close()
    monkeypatch.setattr(features, "OBS_VERSION", 2)
    with pytest.raises(checkpoint.IncompatibleCheckpointError, match="obs_version=1"):
        load_selector(tmp_path / "sel")


def test_missing_checkpoint_dir_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no selector checkpoint"):
        load_selector(tmp_path / "nothing")


def _random_log(n, seed=0):
    rng = np.random.default_rng(seed)
    mask = rng.random((n, 5)) < 0.7
    mask[:, 0] = True
    action = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int32)
    next_mask = np.roll(mask, -1, axis=0)
    episode = np.arange(n) // 3
    return training.TransitionLog(
        obs=rng.normal(size=(n, 98)).astype(np.float32), action=action,
        reward=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, 98)).astype(np.float32), next_mask=next_mask,
        done=(np.arange(n) % 3 == 2).astype(np.float32), mask=mask, episode=episode,
        split=np.where(episode % 10 == 9, "validation", "train"))


def test_vmapped_five_seed_training_equals_five_separate_runs():
    log = _random_log(700)
    vmapped, losses_v = train_offline(CFG, log, seeds=(0, 1, 2, 3, 4), vectorized=True)
    for i, seed in enumerate(range(5)):
        single, losses_s = train_offline(CFG, log, seeds=(seed,), vectorized=False)
        for a, b in zip(jax.tree_util.tree_leaves(single.params),
                        jax.tree_util.tree_leaves(vmapped.params)):
            np.testing.assert_allclose(np.asarray(a)[0], np.asarray(b)[i], rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(losses_s[0], losses_v[i], rtol=1e-4, equal_nan=True)
    assert not np.allclose(np.asarray(jax.tree_util.tree_leaves(vmapped.params)[0][0]),
                           np.asarray(jax.tree_util.tree_leaves(vmapped.params)[0][1]))


def test_offline_training_writes_checkpoints_per_seed(tmp_path):
    log = _random_log(600)
    train_offline(CFG, log, seeds=(0, 1), checkpoint_dir=tmp_path / "sel")
    for seed in (0, 1):
        best = json.loads((tmp_path / "sel" / f"seed_{seed}" / "best.json").read_text())
        assert best["steps"] == [250, 500, len(log.subset("train"))]
        assert load_selector(tmp_path / "sel" / f"seed_{seed}").metadata["seed"] == seed


def test_transition_log_round_trip_and_validation(tmp_path):
    log = _random_log(30)
    training.save_log(log, tmp_path / "log.npz")
    back = training.load_log(tmp_path / "log.npz")
    np.testing.assert_array_equal(back.obs, log.obs)
    log.action[3] = np.flatnonzero(~log.mask[3])[0] if (~log.mask[3]).any() else log.action[3]
    log.mask[3] = [True, False, False, False, False]
    log.action[3] = 2
    training.save_log(log, tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="row 3: logged action is masked"):
        training.load_log(tmp_path / "bad.npz")


def test_fixed_selectors():
    obs = np.zeros(98, np.float32)
    obs[features.SLOT_OFFSET] = 0.6
    mask = np.array([True, True, True, False, False])
    assert policies.AlwaysSkip().select(obs, mask).action == 0
    assert policies.AlwaysTop1().select(obs, mask).action == 1
    assert policies.AlwaysTop1().select(obs, np.array([True] + [False] * 4)).action == 0
    assert policies.RelevanceThreshold(0.5).select(obs, mask).action == 1
    assert policies.RelevanceThreshold(0.7).select(obs, mask).action == 0
    assert policies.make_fixed("relevance_threshold", 0.7).name == "relevance_threshold@0.7"
    with pytest.raises(ValueError, match="unknown fixed selector"):
        policies.make_fixed("oracle")


def test_reward_matches_equation_10():
    r = dqn.reward(CFG, final=True, solved=True, calls=1, failures=0, tokens=5000)
    assert r == pytest.approx(1 - 0.15 - 0.01)
    assert dqn.reward(CFG, final=False, solved=True, calls=1, failures=1, tokens=0) == \
        pytest.approx(-0.4)


def test_offline_replay_of_a_log_equals_online_decision_steps():
    log = _random_log(400)
    offline, _ = train_offline(CFG, log, seeds=(7,))
    train = log.subset("train")
    state, replay = dqn.init_state(CFG, 7), dqn.init_replay(CFG)
    transitions = train.transitions()
    for i in range(len(train)):
        t = jax.tree_util.tree_map(lambda x: x[i], transitions)
        state, replay, _ = dqn.decision_step_jit(state, replay, t, CFG)
    for a, b in zip(jax.tree_util.tree_leaves(state.params),
                    jax.tree_util.tree_leaves(offline.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b)[0], rtol=2e-5, atol=2e-6)
