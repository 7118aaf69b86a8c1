"""One transition type and one learning schedule, and Module III behind its inputs."""
import asyncio
import dataclasses
import types

import jax
import numpy as np
import pytest

from countermem_jax.method.agents import TaskContext
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.method.selector import dqn, features, policies, training
from countermem_jax.method.selector.transition import Transition
from benchmarks.speed.selector_offline import train_offline
from evaluators.base import Outcome, State, Task
from helpers import make_record, paper

CFG = paper("dqn", total_decisions=60, learning_starts=5, train_every=2, target_sync_every=7,
                    checkpoint_every=20, batch_size=4)


def _transitions(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        mask = rng.random(5) < 0.7
        mask[0] = True
        next_mask = rng.random(5) < 0.7
        next_mask[0] = True
        out.append(Transition(obs=rng.normal(size=98).astype(np.float32),
                              action=int(rng.choice(np.flatnonzero(mask))),
                              reward=float(rng.normal()),
                              next_obs=rng.normal(size=98).astype(np.float32),
                              next_mask=next_mask, done=float(i % 3 == 2), mask=mask,
                              task_id=f"t{i // 3}"))
    return out


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_one_transition_type_round_trips_log_replay_and_npz(tmp_path):
    originals = _transitions(30)
    online = training.OnlineLearner(CFG, seed=3)
    for t in originals:
        online.select(t.obs, t.mask)
        online.observe(t)
    log = RunLog(tmp_path / "log.jsonl")
    for t in originals:
        log.write("transition", seed=3, episode=0, **t.to_json())
    back = [Transition.from_json(e) for e in RunLog(tmp_path / "log.jsonl").events("transition")]
    for a, b in zip(originals, back):
        assert a.task_id == b.task_id and a.action == b.action and a.reward == b.reward
        for name in ("obs", "next_obs", "next_mask", "mask", "done"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    replayed = training.OnlineLearner(CFG, seed=3)
    training.replay(replayed, back)
    for a, b in zip(_leaves(online.state), _leaves(replayed.state)):
        np.testing.assert_array_equal(a, b)
    training.save_log(training.log_from_transitions(back[:27], back[27:]), tmp_path / "t.npz")
    npz = training.load_log(tmp_path / "t.npz")
    assert npz.split.tolist() == ["train"] * 27 + ["validation"] * 3
    np.testing.assert_array_equal(npz.episode, np.arange(30) // 3)
    stacked = npz.subset("train").transitions()
    assert isinstance(stacked, Transition) and stacked.obs.shape == (27, 98)
    np.testing.assert_array_equal(np.asarray(stacked.action), [t.action for t in originals[:27]])
    # the same type is what the replay buffer samples
    assert dqn.Transition is Transition


def test_online_step_and_offline_scan_run_the_same_schedule_function(monkeypatch):
    seen = []
    real = dqn.schedule

    def spy(state, replay, transition, d, cfg):
        seen.append(cfg)
        return real(state, replay, transition, d, cfg)
    monkeypatch.setattr(dqn, "schedule", spy)
    cfg = dataclasses.replace(CFG, total_decisions=61)  # a config no other test has traced
    t = _transitions(1)[0].for_replay()
    dqn.decision_step(dqn.init_state(cfg, 0), dqn.init_replay(cfg), t, cfg)
    assert seen == [cfg]   # one seed, online
    log = training.log_from_transitions(_transitions(9), _transitions(3, seed=1))
    train_offline(cfg, log, seeds=(0, 1))
    assert len(seen) > 1 and set(seen) == {cfg}   # a stack of seeds, in the offline scan


@dataclasses.dataclass
class _Recording:
    """A selector or construction hooks that remember what Module III handed them."""
    inner: object = None
    observed: list = dataclasses.field(default_factory=list)
    reuses: list = dataclasses.field(default_factory=list)
    failures: list = dataclasses.field(default_factory=list)
    name: str = "recording"

    def select(self, obs, mask):
        return self.inner.select(obs, mask)

    def observe(self, transition):
        self.observed.append(transition)

    def observe_reuse(self, record_id, label):
        self.reuses.append((record_id, label))

    async def after_failure(self, ctx, state_before, action, outcome):
        self.failures.append(action)


class _Calls:
    """Stands in for ``agents.MemoryCalls``: what a decision may ask the agent's LLM."""

    def __init__(self):
        self.revised = []

    async def revise_with_record(self, ctx, draft, record_text):
        self.revised.append(record_text)
        ctx.book(10)
        return types.SimpleNamespace(ok=True, value="SELECT name FROM people WHERE age >= 18")


def test_module_three_takes_index_source_selector_hooks_and_calls():
    record = make_record(source_task_id="other", condition="")
    index = RetrievalIndex([record], top_k=1)
    sources = []
    selector = _Recording(inner=policies.AlwaysTop1())
    hooks = _Recording()
    calls = _Calls()
    aug = CounterMemAugmentation(calls, index_source=lambda: sources.append(1) or index,
                                 selector=selector, hooks=hooks, dqn_cfg=paper("dqn"))
    task = Task("q", "sql", "people", "List people older than 18.", "", "join / predicate")
    ctx = TaskContext(task, "selector_training", "r", State(task), call_budget=3,
                      token_budget=1000, max_decisions=3)
    fail = Outcome(0.0, False, True, "rows differ", world_model_calls=1)

    async def episode():
        for k in range(2):
            ctx.decision, ctx.decision_tokens_start = k, ctx.tokens
            info = await aug.decide(ctx, "SELECT name FROM people WHERE age > 18")
            ctx.calls += 1
            ctx.failures += 1
            await aug.observe(ctx, "SELECT name FROM people WHERE age > 18", info, fail, None)
            await aug.after_failure(ctx, ctx.state, info.action, fail)
        await aug.end_task(ctx)
        return info
    info = asyncio.run(episode())
    assert info.record_id == record.record_id and len(calls.revised) == 2
    assert len(sources) == 2  # the index is asked for at every decision
    assert [r for r, _ in hooks.reuses] == [record.record_id] * 2 and len(hooks.failures) == 2
    assert [t.done for t in selector.observed] == [0.0, 1.0]
    assert selector.observed == aug.transitions
    assert all(t.task_id == "q" and t.action == 1 for t in aug.transitions)
    assert aug.transitions[1].next_mask.tolist() == [True, False, False, False, False]
    # Eq. 10: one call, one failure and the revision's 10 tokens per decision
    expected = dqn.reward(paper("dqn"), final=False, solved=False, calls=1, failures=1,
                          tokens=10)
    assert [t.reward for t in aug.transitions] == pytest.approx([expected] * 2)
    assert aug.transitions[0].obs.shape == (features.OBS_DIM,)
