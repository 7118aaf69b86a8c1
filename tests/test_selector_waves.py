"""Selector training in waves: W episodes act concurrently with the parameters of the
wave's start; the result depends on W only, never on the event loop's interleaving, and a kill
mid-wave resumes to the uninterrupted result."""
import json
import random

import asyncio
import jax
import numpy as np
import pytest

from helpers import paper

from countermem_jax import experiment
from countermem_jax.protocol.analysis import load_selector
from countermem_jax.backbones.base import Charge, SamplingParams
from countermem_jax.runtime.runlog import RunLog
# ScriptedBackbone as test_pipeline imports it (its module moves to benchmarks.testing)
from test_pipeline import ScriptedBackbone, _config, people_benchmark, scripted  # noqa: F401


class _Killed(RuntimeError):
    pass


class JitteryBackbone(ScriptedBackbone):
    """The pipeline tests' scripted replies after a random delay (so concurrent episodes finish
    in a different order for each ``delay_seed``); optionally killed after ``kill_after`` calls
    or at the first call charged to a run named ``kill_in``."""

    def __init__(self, delay_seed: int, kill_after: int | None = None, kill_in: str | None = None):
        super().__init__(scripted().rules)
        self.rng, self.kill_after, self.kill_in = random.Random(delay_seed), kill_after, kill_in
        self.in_flight = self.peak = 0

    async def chat(self, messages, params: SamplingParams = SamplingParams(),
                   charge: Charge = Charge()):
        if ((self.kill_after is not None and len(self.calls) >= self.kill_after)
                or (self.kill_in is not None and charge.decision.startswith(self.kill_in))):
            raise _Killed(f"killed after {len(self.calls)} calls at {charge.decision}")
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.rng.random() * 0.004)
            return await super().chat(messages, params, charge)
        finally:
            self.in_flight -= 1


def _wave_config(tmp_path, wave_size):
    cfg = _config(tmp_path, selector="dqn")
    cfg.selector.update(total_decisions=10, checkpoint_every=4, wave_size=wave_size)
    return cfg


def _train(tmp_path, benchmark, name, wave_size, backbone):
    cfg = _wave_config(tmp_path, wave_size)
    wd = tmp_path / name
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=benchmark)
    experiment.train_selector(cfg, wd, backbone=backbone, benchmark=benchmark)
    return wd


def _result(wd):
    """Best checkpoints, their parameters and the learner's transitions, per seed."""
    out = {}
    for seed in (0, 1):
        directory = wd / "selector" / f"seed_{seed}"
        params = [np.asarray(x) for x in jax.tree_util.tree_leaves(load_selector(directory).params)]
        transitions = sorted((e["episode"], e["task_id"], e["action"], e["reward"])
                             for e in RunLog(wd / "log.jsonl").events("transition")
                             if e["seed"] == seed)
        out[seed] = (json.loads((directory / "best.json").read_text()), params, transitions)
    return out


def _assert_same(a, b):
    for seed in (0, 1):
        assert a[seed][0] == b[seed][0]
        for x, y in zip(a[seed][1], b[seed][1]):
            np.testing.assert_array_equal(x, y)
        assert a[seed][2] == b[seed][2]


def test_a_wave_gives_the_same_result_whatever_the_interleaving(tmp_path, people_benchmark):
    backbones = [JitteryBackbone(delay_seed) for delay_seed in (1, 2)]
    results = [_result(_train(tmp_path, people_benchmark, f"wd{i}", 4, b))
               for i, b in enumerate(backbones)]
    assert all(b.peak > 1 for b in backbones)  # episodes, seeds and validations overlapped
    _assert_same(*results)


def test_episodes_of_a_wave_act_with_the_parameters_of_its_start(tmp_path, people_benchmark):
    wd = _train(tmp_path, people_benchmark, "wd", 4, scripted())
    first_q = {}
    for d in RunLog(wd / "log.jsonl").events("decision"):
        if d["run"].startswith("train/seed0/") and d["decision"] == 0:
            episode = int(d["run"].rsplit("episode", 1)[1])
            first_q[episode] = (d["task_id"], d["memory"]["q_values"])
    # episodes 0 and 2 (and 1 and 3) start the same task in the first wave: the same Q-values,
    # although the learner updates after every decision (train_every = learning_starts = 1)
    assert first_q[0] == first_q[2] and first_q[1] == first_q[3]
    assert first_q[4][0] == first_q[0][0] and first_q[4] != first_q[0]  # the next wave learned


@pytest.mark.parametrize("kill", [{"kill_after": 7}, {"kill_after": 23},
                                  {"kill_in": "validation/seed0@4/"}])
def test_a_kill_mid_wave_resumes_to_the_uninterrupted_result(tmp_path, people_benchmark, kill):
    """Killed while the wave's episodes run (nothing of the wave logged) or while the
    checkpoint reached inside the wave is validated, after the wave (its episodes logged, the
    checkpoint not saved)."""
    reference = _result(_train(tmp_path, people_benchmark, "ref", 4, JitteryBackbone(0)))
    with pytest.raises(_Killed):
        _train(tmp_path, people_benchmark, "wd", 4, JitteryBackbone(1, **kill))
    if "kill_in" in kill:  # the kill left the first wave logged and its checkpoint unsaved
        episodes = {e["episode"] for e in RunLog(tmp_path / "wd" / "log.jsonl").events("transition")
                    if e["seed"] == 0}
        assert episodes == {0, 1, 2, 3}
        assert not (tmp_path / "wd" / "selector" / "seed_0" / "best.json").exists()
    resumed = _result(_train(tmp_path, people_benchmark, "wd", 4, JitteryBackbone(2)))
    _assert_same(reference, resumed)


def test_an_episodes_exploration_keys_do_not_depend_on_the_wave_size(tmp_path, people_benchmark):
    """Episodes 0 and 1 act with the initial parameters at W = 2 and at W = 4; with keys derived
    from (seed, episode, decision) they make the same choices whatever W."""
    choices = {}
    for w in (2, 4):
        wd = _train(tmp_path, people_benchmark, f"w{w}", w, scripted())
        choices[w] = [(d["run"], d["decision"], d["memory"]["selector_action"],
                       d["memory"]["q_values"])
                      for d in RunLog(wd / "log.jsonl").events("decision")
                      if d["run"] in ("train/seed0/episode0", "train/seed0/episode1")]
    assert choices[2] and sorted(choices[2]) == sorted(choices[4])


def test_an_episodes_transitions_reach_the_log_in_one_write(tmp_path, people_benchmark,
                                                           monkeypatch):
    """A kill between two lines of one episode would leave half an episode that resume counts
    as done: every episode's transitions are appended in one write."""
    from countermem_jax.runtime import runlog
    writes = []
    append = runlog._append

    def spy(path, line, sync):
        episodes = [json.loads(x)["episode"] for x in line.splitlines()
                    if json.loads(x)["event"] == "transition"]
        if episodes:
            writes.append(episodes)
        return append(path, line, sync)
    monkeypatch.setattr(runlog, "_append", spy)
    wd = _train(tmp_path, people_benchmark, "one_write", 2, JitteryBackbone(0))
    logged = {}
    for e in RunLog(wd / "log.jsonl").events("transition"):
        logged.setdefault((e["seed"], e["episode"]), 0)
        logged[(e["seed"], e["episode"])] += 1
    assert writes and all(len(set(w)) == 1 for w in writes)  # never two episodes in one write
    assert sorted(len(w) for w in writes) == sorted(logged.values())  # nor one split in two


def test_the_checkpoints_a_wave_reaches_are_validated_together(tmp_path, people_benchmark,
                                                               monkeypatch):
    """With a checkpoint every 2 decisions, a wave of 4 episodes reaches two or more; their
    validation episodes run together after the wave (both validations start before either
    ends), and the result is the one validating them one after another gave (same checkpoints
    and returns as at W = 4 validated in sequence)."""
    from countermem_jax.phases import train
    order = []
    original = train.SeedRun.validate

    async def traced(self, decisions, params):
        order.append(("start", self.seed, decisions))
        try:
            return await original(self, decisions, params)
        finally:
            order.append(("end", self.seed, decisions))
    monkeypatch.setattr(train.SeedRun, "validate", traced)
    cfg = _wave_config(tmp_path, 4)
    cfg.selector.checkpoint_every = 2
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    experiment.train_selector(cfg, wd, backbone=JitteryBackbone(3), benchmark=people_benchmark)
    seed0 = [(kind, d) for kind, seed, d in order if seed == 0]
    starts_before_first_end = [d for kind, d in seed0[:seed0.index(next(
        e for e in seed0 if e[0] == "end"))]]
    assert len(starts_before_first_end) >= 2  # the first wave's checkpoints overlapped
    best = json.loads((wd / "selector" / "seed_0" / "best.json").read_text())
    assert sorted(int(k) for k in best["val_returns"]) == [2, 4, 6, 8, 10]


def test_a_wave_starts_no_more_episodes_than_decisions_remain(tmp_path, people_benchmark):
    """Every episode makes at least one decision, so with 18 decisions at W = 8 the second wave
    starts only as many episodes as decisions remain after the first (not 8, most of which
    the learner would drop unseen, their LLM calls charged to the cost of training)."""
    cfg = _wave_config(tmp_path, 8)
    cfg.selector.total_decisions = 18
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    experiment.train_selector(cfg, wd, backbone=JitteryBackbone(4), benchmark=people_benchmark)
    log = RunLog(wd / "log.jsonl")
    first_wave = sum(1 for e in log.events("transition") if e["seed"] == 0 and e["episode"] < 8)
    started = [e for e in log.events("task_end") if e["run"].startswith("train/seed0/")]
    assert first_wave < 18  # a second wave was needed
    assert len(started) == 8 + (18 - first_wave)


def _curves(wd):
    from countermem_jax.runtime import curves
    return {seed: curves.read_scalars(wd / "curves" / "selector" / f"seed_{seed}")
            for seed in (0, 1)}


@pytest.mark.parametrize("wave_size", [1, 4])
def test_a_kill_resumes_to_the_uninterrupted_curves(tmp_path, people_benchmark, wave_size):
    """After a kill mid-training, the resumed run's checkpoints, transitions and learning
    curves (loss, ε, mean Q per episode; validation return per checkpoint) are those of the
    uninterrupted run, one episode at a time (the learner acting itself) and in waves."""
    reference = _train(tmp_path, people_benchmark, "ref", wave_size, JitteryBackbone(0))
    with pytest.raises(_Killed):
        _train(tmp_path, people_benchmark, "wd", wave_size, JitteryBackbone(1, kill_after=23))
    resumed = _train(tmp_path, people_benchmark, "wd", wave_size, JitteryBackbone(2))
    _assert_same(_result(reference), _result(resumed))
    want, got = _curves(reference), _curves(resumed)
    assert want[0]["train/loss"] and want[0]["validation/return"]
    for seed in (0, 1):
        assert set(got[seed]) == set(want[seed])
        for tag, points in want[seed].items():   # steps exactly, values approximately
            assert [step for step, _ in got[seed][tag]] == [step for step, _ in points], tag
            assert [value for _, value in got[seed][tag]] == pytest.approx(
                [value for _, value in points]), tag


@pytest.mark.parametrize("wave_size", [1, 2])
def test_the_loop_learns_each_decision_once_and_validates_checkpoints_after_acting(wave_size):
    """``dqn_loop`` over a stand-in for the seed's run (three decisions an episode, each chosen
    and observed by the episode's selector): every decision reaches the learner once, the
    checkpoints every 5 decisions are validated after the acting that reached them, the last
    partial interval is checkpointed, episodes are logged in order, one at a time or in waves."""
    from countermem_jax.method.selector import training
    from countermem_jax.method.selector.transition import Transition
    from countermem_jax.phases import train
    cfg = paper("dqn", total_decisions=10, checkpoint_every=5, learning_starts=1, train_every=1,
                batch_size=2, replay_capacity=16, hidden=(8,))
    calls = []

    class Run:
        def begin(self, decisions, episode):
            calls.append(("begin", decisions, episode))

        async def train_episode(self, episode, selector):
            rows = []
            for i in range(3):
                obs = np.full(98, episode + i / 10, np.float32)
                action = selector.select(obs, np.ones(5, bool)).action
                rows.append(Transition(obs=obs, action=action, reward=0.1, next_obs=obs,
                                       next_mask=np.ones(5, bool), done=float(i == 2),
                                       mask=np.ones(5, bool)))
                selector.observe(rows[-1])
            return rows

        def write_curves(self, rows, learner):
            calls.append(("curves", learner.decisions))

        def log_episode(self, episode, rows):
            calls.append(("log", episode, len(rows)))

        async def checkpoint(self, reached):
            calls.append(("checkpoint", [d for d, _ in reached]))

        def saved_steps(self):
            return [d for c in calls if c[0] == "checkpoint" for d in c[1]]

    learner = training.OnlineLearner(cfg, seed=0)
    episodes = asyncio.run(train.dqn_loop(learner, Run(), wave_size, {}))
    assert episodes == 4 and learner.decisions == 12
    if wave_size == 1:
        assert calls == [("begin", 0, 0), ("curves", 3), ("log", 0, 3), ("checkpoint", []),
                         ("curves", 6), ("log", 1, 3), ("checkpoint", [5]),
                         ("curves", 9), ("log", 2, 3), ("checkpoint", []),
                         ("curves", 12), ("log", 3, 3), ("checkpoint", [10]),
                         ("checkpoint", [12])]
    else:
        assert calls == [("begin", 0, 0), ("curves", 3), ("curves", 6), ("log", 0, 3),
                         ("log", 1, 3), ("checkpoint", [5]),
                         ("curves", 9), ("curves", 12), ("log", 2, 3), ("log", 3, 3),
                         ("checkpoint", [10]), ("checkpoint", [12])]
