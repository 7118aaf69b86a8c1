"""Every hyperparameter group of the paper is a config field that reaches the code using it:
each test changes one field by a ``--config.`` override, parsed by ml_collections' config_flags
as the binaries parse it, and sees the effect where the method reads it (paper §3, App. B–C)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl import flags
from ml_collections import config_flags

from countermem_jax.method.memory import MemoryStore
from countermem_jax.phases import build, context
from countermem_jax.method.conditions.checkers import LLMJudgeChecker, RuleChecker
from countermem_jax.domains.sql_names import SQL_NAMES
from countermem_jax.method import edit_replay
from countermem_jax.method.agents import Agent
from countermem_jax.method.selector import dqn, features
from countermem_jax.method.selector.transition import Transition
from helpers import agent_config, make_record
from test_pipeline import people_benchmark  # noqa: F401 (fixture)

PAPER = "--config=configs/paper.py:spider,react,gptoss"


def _method(*overrides: str) -> context.MethodConfig:
    """The method's typed sections after the binaries' flag parsing of ``overrides``."""
    argv = ["prog", PAPER, *(f"--config.{o}" for o in overrides)]
    values = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=values, lock_config=True,
                                    sys_argv=argv)   # as the binaries, which read sys.argv
    values(argv)
    return context.method_config(values.config)


def test_defaults_are_the_papers_values():
    m = _method()
    assert (m.dqn.learning_rate, m.dqn.gamma, m.dqn.hidden, m.dqn.batch_size) == (
        1e-3, 0.95, (64, 64), 32)
    assert (m.dqn.epsilon_start, m.dqn.epsilon_end, m.dqn.replay_capacity) == (0.30, 0.05, 10_000)
    assert (m.dqn.call_penalty, m.dqn.failure_penalty, m.dqn.token_penalty, m.dqn.token_scale) \
        == (0.15, 0.25, 0.02, 1e4)
    assert (m.dqn.target_sync_every, m.dqn.checkpoint_every, m.dqn.total_decisions) == (
        250, 250, 2000)
    a, w = m.store.admission, m.store.retention_weights
    assert (a.w_delta, a.w_reuse, a.w_repeat, a.w_conflict, a.threshold, a.epsilon) == (
        1.0, 0.5, 0.7, 1.0, 0.1, 0.05)
    assert (w.alpha, w.beta, w.omega, w.eta, m.store.reuse_rho) == (1.0, 1.0, 0.5, 0.7, 0.3)
    assert (m.store.capacity, m.retrieval.top_k, m.retrieval.reuse_weight) == (200, 3, 0.2)
    assert (m.construction.k, m.construction.max_expanded_failures) == (4, 2)


def test_learning_rate_reaches_the_optimizer():
    cfg = _method("selector.dqn.learning_rate=3e-4").dqn
    params = {"w": jnp.zeros(3)}
    opt = dqn.optimizer(cfg)
    updates, _ = opt.update({"w": jnp.ones(3)}, opt.init(params), params)
    np.testing.assert_allclose(updates["w"], -3e-4, rtol=1e-4)   # Adam's first step is lr


def test_hidden_sizes_reach_the_network():
    state = dqn.init_state(_method("selector.dqn.hidden=(32,16)").dqn, 0)
    shapes = [p.shape for p in jax.tree_util.tree_leaves(state.params["params"])
              if p.ndim == 2]
    assert shapes == [(features.OBS_DIM, 32), (32, 16), (16, features.NUM_ACTIONS)]


def test_discount_reaches_the_td_target():
    cfg = _method("selector.dqn.gamma=0.5").dqn
    params = dqn.init_state(cfg, 0).params
    obs = jnp.ones((1, features.OBS_DIM), jnp.float32)
    batch = Transition(obs=obs, action=jnp.zeros(1, jnp.int32), reward=jnp.ones(1, jnp.float32),
                       next_obs=obs, next_mask=jnp.ones((1, features.NUM_ACTIONS), bool),
                       done=jnp.zeros(1, jnp.float32))
    best_next = float(jnp.max(dqn.q_values(cfg, params, obs)))
    assert float(dqn.td_targets(cfg, params, batch)[0]) == pytest.approx(1 + 0.5 * best_next,
                                                                         rel=1e-5)


def test_replay_capacity_and_batch_reach_the_buffer():
    cfg = _method("selector.dqn.replay_capacity=7", "selector.batch_size=5").dqn
    replay = dqn.init_replay(cfg)
    assert replay.action.shape == (7,)
    assert dqn.replay_sample(replay, jax.random.PRNGKey(0), cfg.batch_size).action.shape == (5,)


def test_epsilon_schedule_reaches_exploration():
    cfg = _method("selector.dqn.epsilon_start=0.9", "selector.dqn.epsilon_end=0.1",
                  "selector.dqn.exploration_fraction=0.5", "selector.total_decisions=100").dqn
    assert float(dqn.epsilon(cfg, 0)) == pytest.approx(0.9)
    assert float(dqn.epsilon(cfg, 25)) == pytest.approx(0.5)
    assert float(dqn.epsilon(cfg, 80)) == pytest.approx(0.1)


def test_target_sync_and_checkpoint_cadence_reach_the_schedule():
    cfg = _method("selector.target_sync_every=3", "selector.checkpoint_every=5",
                  "selector.learning_starts=0", "selector.train_every=1",
                  "selector.batch_size=2").dqn
    state, replay = dqn.init_state(cfg, 0), dqn.init_replay(cfg)
    t = Transition(obs=jnp.ones(features.OBS_DIM, jnp.float32), action=jnp.int32(0),
                   reward=jnp.float32(1.0), next_obs=jnp.ones(features.OBS_DIM, jnp.float32),
                   next_mask=jnp.ones(features.NUM_ACTIONS, bool), done=jnp.float32(1.0))
    synced = []
    for _ in range(3):
        state, replay, _ = dqn.decision_step(state, replay, t, cfg)
        same = jax.tree_util.tree_map(lambda a, b: bool(jnp.all(a == b)), state.params,
                                      state.target_params)
        synced.append(all(jax.tree_util.tree_leaves(same)))
    assert synced == [False, False, True]     # θ⁻ <- θ at decision 3, not before
    assert [d for d in range(1, 11) if dqn.is_checkpoint(cfg, d)] == [5, 10]


def test_reward_weights_reach_the_reward():
    cfg = _method("selector.reward.call_penalty=0.5", "selector.reward.token_scale=1000.0").dqn
    r = dqn.reward(cfg, final=True, solved=True, calls=2, failures=1, tokens=500)
    assert r == pytest.approx(1.0 - 0.5 * 2 - 0.25 * 1 - 0.02 * 500 / 1000)


def test_admission_threshold_and_epsilon_reach_admission():
    record = make_record(before=0.5, after=0.58)   # Δ = 0.08: S_adm = 0.08
    assert not MemoryStore(_method().store).propose(record)[0].admitted   # τ_adm = 0.1
    assert MemoryStore(_method("memory.admission.threshold=0.05").store).propose(record)[0].admitted
    decision, _ = MemoryStore(_method("construction.epsilon=0.1").store).propose(record)
    assert decision.reason == "delta<=epsilon"


def test_admission_weights_reach_the_score():
    decision, _ = MemoryStore(_method("memory.admission.w_delta=0.5").store).propose(
        make_record())
    assert decision.score == pytest.approx(0.5)   # λ_Δ·Δ̃ with Δ = 1


def _three_records():
    return [make_record(source_task_id=f"t{i}", situation=f"situation {i} on table_{i}",
                        original=f"SELECT a{i} FROM t{i} WHERE x > {i}",
                        improved=f"SELECT b{i} FROM t{i} WHERE y <= {i * 7}",
                        before=b, reuse=u)
            for i, (b, u) in enumerate([(0.5, 0.9), (0.0, -0.9), (0.2, 0.0)])]


@pytest.mark.parametrize("override, victim", [
    ((), "t1"),                                      # β = 1: the negative reuse goes first
    (("memory.retention_weights.beta=0.0",), "t0"),  # reuse ignored: the smallest Δ goes
])
def test_retention_weights_reach_eviction(override, victim):
    store = MemoryStore(_method("memory.capacity=2", *override).store)
    evicted = [store.propose(r)[1] for r in _three_records()]
    assert evicted[-1] == [r.record_id for r in _three_records() if r.source_task_id == victim]


def test_reuse_rho_reaches_the_reuse_update():
    store = MemoryStore(_method("memory.reuse_rho=0.5").store)
    record = make_record()
    store.propose(record)
    assert store.observe_reuse(record.record_id, 1).reuse_utility == pytest.approx(0.5)


def test_top_k_and_reuse_weight_reach_retrieval():
    m = _method("memory.top_k=2", "memory.reuse_weight=0.7", "memory.judge.max_tokens=77",
                "memory.fallback_condition=derive")
    index = context.retrieval_index(m, [], context.condition_checker(m))
    assert (index.top_k, index.reuse_weight) == (2, 0.7)
    rule, judge = context.condition_checker(m)._checkers
    assert isinstance(rule, RuleChecker) and rule.fallback == "derive"
    assert isinstance(judge, LLMJudgeChecker) and judge.settings.max_tokens == 77


def test_revision_and_condition_rendering_are_one_section_read_by_every_phase():
    """``memory.revision`` and ``memory.render_condition`` reach construction's augmentation
    and retrieval's place test through the typed ``use`` section, as training and evaluation
    read them; the construction's fixed selector comes from its own section."""
    m = _method("memory.revision=replay", "memory.render_condition=False",
                "construction.reuse_policy=relevance_threshold",
                "construction.relevance_threshold=0.25")
    assert (m.use.revision, m.use.render_condition) == ("replay", False)
    aug = build._construction_augmentation(m, Agent(None, None, None, agent_config()),
                                           lambda: None, hooks=None)
    assert (aug.revision, aug.render_condition) == ("replay", False)
    assert aug.selector.name == "relevance_threshold@0.25"
    index = context.retrieval_index(m, [], context.condition_checker(m), names=SQL_NAMES)
    # replay offers only records that fit, tested with the domain's names hook
    assert index.fits.func is edit_replay.record_fits and index.fits.keywords == {
        "names": SQL_NAMES}
    assert context.retrieval_index(_method(), [], context.condition_checker(m)).fits is None


def test_construction_budgets_reach_modules_one_and_two():
    c = _method("construction.k=2", "construction.max_expanded_failures=1",
                "construction.verification_budget=3").construction
    assert (c.k, c.max_expanded_failures, c.verification_budget) == (2, 1, 3)


def test_the_dqn_table_flows_from_the_config_into_the_trained_selector(tmp_path, people_benchmark):
    """One reading of the config per phase: the overridden table is what training used and
    what its checkpoints record (the network restored for evaluation has its widths)."""
    from test_pipeline import _config, scripted
    from countermem_jax import experiment
    from countermem_jax.method.selector import checkpoint
    cfg = _config(tmp_path, selector="dqn")
    cfg.selector.seeds = (0,)
    cfg.selector.dqn.update(hidden=(8,), learning_rate=5e-4)
    cfg.selector.reward.call_penalty = 0.4
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    experiment.train_selector(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    params, meta = checkpoint.restore(wd / "selector" / "seed_0")
    assert (meta["config"]["hidden"], meta["config"]["learning_rate"],
            meta["config"]["call_penalty"]) == ([8], 5e-4, 0.4)
    kernels = [p.shape for p in jax.tree_util.tree_leaves(params) if p.ndim == 2]
    assert kernels == [(features.OBS_DIM, 8), (8, features.NUM_ACTIONS)]
