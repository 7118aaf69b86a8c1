"""Protocol integrity: real selector seeds, per-seed evaluation with intervals,
and cost accounting, end to end with the scripted backbone and the real SQL checker."""
import asyncio
import json
import math
import shutil

import numpy as np
import pytest

from countermem_jax import experiment
from countermem_jax.protocol import intervals, metrics
from countermem_jax.method.agents import Agent, Augmentation
from countermem_jax.protocol.analysis import load_selector
from countermem_jax.backbones.base import Backbone, Charge, SamplingParams
from benchmarks.testing.scripted_backbone import Rule
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.method.selector import checkpoint, dqn, training
from benchmarks.speed.selector_offline import train_offline
from helpers import agent_config, paper
from test_pipeline import MANIFEST, _config, people_benchmark, scripted  # noqa: F401 (fixture)


def _build_and_train(tmp_path, people_benchmark, wd_name="wd"):
    cfg = _config(tmp_path, selector="dqn")
    wd = tmp_path / wd_name
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    summary = experiment.train_selector(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    return cfg, wd, summary


def test_every_seed_is_a_real_training_run_validated_on_real_episodes(tmp_path, people_benchmark):
    cfg, wd, summary = _build_and_train(tmp_path, people_benchmark)
    log = RunLog(wd / "log.jsonl")
    for seed in (0, 1):
        train_runs = {e["run"] for e in log.events("task_end")
                      if e.get("seed") == seed and e["run"].startswith("train/")}
        assert train_runs, f"seed {seed} ran no training episodes of its own"
        assert sum(1 for t in log.events("transition") if t["seed"] == seed) >= 6
        best = json.loads((wd / "selector" / f"seed_{seed}" / "best.json").read_text())
        returns = {int(k): v for k, v in best["val_returns"].items()}
        assert sorted(returns) == best["steps"] == [3, 6]  # every checkpoint_every decisions
        assert all(math.isfinite(v) for v in returns.values())
        assert best["best_val_return"] == max(returns.values()) == returns[best["best_step"]]
        for step in returns:  # each checkpoint was scored on the validation split's episodes
            validation = [e for e in log.events("task_end")
                          if e["run"] == f"validation/seed{seed}@{step}"]
            assert [e["task_id"] for e in validation] == MANIFEST["validation"]
        assert summary["seeds"][str(seed)]["best_val_return"] == best["best_val_return"]
        assert (wd / "selector" / f"transitions_seed{seed}.npz").exists()
    # Own initial parameters and exploration keys: the seeds' first Q-values differ.
    first_q = {}
    for d in log.events("decision"):
        if d["run"].startswith("train/") and d["decision"] == 0:
            first_q.setdefault(d["seed"], d["memory"]["q_values"])
    assert first_q[0] != first_q[1]


def test_a_killed_seed_resumes_to_the_uninterrupted_result(tmp_path, people_benchmark):
    _, ref_wd, _ = _build_and_train(tmp_path, people_benchmark, "ref")
    cfg = _config(tmp_path, selector="dqn")
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    crashing = scripted()

    def boom(messages):
        raise RuntimeError("killed during seed 1")
    crashing.rules.insert(0, Rule(boom, task="train/seed1/episode2/"))
    with pytest.raises(RuntimeError, match="killed during seed 1"):
        experiment.train_selector(cfg, wd, backbone=crashing, benchmark=people_benchmark)
    seed0_ends = len([e for e in RunLog(wd / "log.jsonl").events("task_end") if e.get("seed") == 0])
    experiment.train_selector(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    ends = RunLog(wd / "log.jsonl").events("task_end")
    assert len([e for e in ends if e.get("seed") == 0]) == seed0_ends  # seed 0 was not redone
    for seed in (0, 1):
        ref = json.loads((ref_wd / "selector" / f"seed_{seed}" / "best.json").read_text())
        got = json.loads((wd / "selector" / f"seed_{seed}" / "best.json").read_text())
        assert got == ref
        a = load_selector(ref_wd / "selector" / f"seed_{seed}").params
        b = load_selector(wd / "selector" / f"seed_{seed}").params
        for x, y in zip(jax_leaves(a), jax_leaves(b)):
            np.testing.assert_array_equal(x, y)


def jax_leaves(tree):
    import jax
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_non_finite_validation_scores_are_errors(tmp_path):
    cfg = paper("dqn")
    ckpt = checkpoint.SelectorCheckpointer(tmp_path / "sel", cfg, seed=0)
    with pytest.raises(ValueError, match="not finite"):
        ckpt.save(250, dqn.init_state(cfg, 0).params, float("nan"))
    ckpt.close()
    rng = np.random.default_rng(0)
    n = 30
    mask = np.ones((n, 5), bool)
    log = training.TransitionLog(
        obs=rng.normal(size=(n, 98)).astype(np.float32), action=np.zeros(n, np.int32),
        reward=np.zeros(n, np.float32), next_obs=rng.normal(size=(n, 98)).astype(np.float32),
        next_mask=mask, done=np.ones(n, np.float32), mask=mask, episode=np.arange(n),
        split=np.array(["train"] * n))
    with pytest.raises(ValueError, match="no validation rows"):
        train_offline(paper("dqn", checkpoint_every=10), log, seeds=(0,),
                      checkpoint_dir=tmp_path / "offline")


def test_offline_analysis_of_a_seed_log_has_a_finite_proxy(tmp_path, people_benchmark):
    _, wd, _ = _build_and_train(tmp_path, people_benchmark)
    log = training.load_log(wd / "selector" / "transitions_seed0.npz")
    assert len(log.subset("validation")) > 0 and len(log.subset("train")) >= 6
    train_offline(paper("dqn", checkpoint_every=3, learning_starts=1, train_every=1,
                                batch_size=2, target_sync_every=2), log, seeds=(7, 8),
                  checkpoint_dir=tmp_path / "offline")
    for seed in (7, 8):
        best = json.loads((tmp_path / "offline" / f"seed_{seed}" / "best.json").read_text())
        assert all(math.isfinite(v) for v in best["val_returns"].values())


def test_two_seeds_are_evaluated_in_their_own_runs_with_intervals(tmp_path, people_benchmark,
                                                                  capsys):
    cfg, wd, _ = _build_and_train(tmp_path, people_benchmark)
    result = experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    out = capsys.readouterr().out
    eval_ids = set(MANIFEST["eval"])
    for seed in (0, 1):
        run = f"countermem-dqn-seed{seed}"
        ends = RunLog(wd / "eval" / run / "log.jsonl").events("task_end")
        assert {e["task_id"] for e in ends} == eval_ids and {e["run"] for e in ends} == {run}
        assert all(e["seed"] == seed for e in ends)
        per_run = json.loads((wd / "eval" / run / "metrics.json").read_text())
        assert per_run["seed"] == seed and per_run["metrics"]["tasks"] == len(eval_ids)
    base_ends = RunLog(wd / "eval" / "base" / "log.jsonl").events("task_end")
    assert sorted(e["task_id"] for e in base_ends) == sorted(eval_ids)  # the base agent once
    saved = json.loads((wd / "metrics.json").read_text())
    agg = saved["aggregate"]
    assert set(agg["per_seed"]) == {"0", "1"} and set(agg["rescued"]) == {"0", "1"}
    for key in ("score", "score_difference"):
        s = agg[key]
        assert s["seeds"] == 2 and s["tasks"] == 2 and len(s["per_seed"]) == 2
        assert s["ci95"][0] <= s["mean"] <= s["ci95"][1] and s["std"] is not None
    assert agg["score"]["mean"] == pytest.approx(np.mean([agg["per_seed"][k]["score"]
                                                          for k in ("0", "1")]))
    assert "score (0-100) [95% CI]" in out and "mean over 2 selector seed(s) (0, 1)" in out
    assert "cost of building" in out and "selector seed 1: validation" in out
    # A second evaluation resumes every run: nothing is redone, nothing overwritten.
    experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    for run in ("base", "countermem-dqn-seed0", "countermem-dqn-seed1"):
        assert len(RunLog(wd / "eval" / run / "log.jsonl").events("task_end")) == 2
    assert json.loads((wd / "metrics.json").read_text())["aggregate"] == agg
    assert result["aggregate"]["score"] == agg["score"]


def test_cost_of_building_counts_every_phase(tmp_path, people_benchmark):
    cfg = _config(tmp_path, selector="dqn")
    wd = tmp_path / "wd"
    build_backbone = scripted()
    experiment.build_memory(cfg, wd, backbone=build_backbone, benchmark=people_benchmark)
    train_backbone = scripted()
    experiment.train_selector(cfg, wd, backbone=train_backbone, benchmark=people_benchmark)
    result = experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    cost = result["cost_of_building"]
    log = RunLog(wd / "log.jsonl")
    counterfactuals = log.events("counterfactual")
    c = cost["construction"]
    assert c["counterfactual_checks"] == len(counterfactuals) > 0
    assert c["llm_calls"] == len(build_backbone.calls)
    assert c["tokens"] == build_backbone.ledger.total("construction").total
    assert c["counterfactual_tokens"] == sum(
        u.total for p, u in build_backbone.ledger.by_purpose.items()
        if p in ("GENERATE_LOCAL_ALTERNATIVES", "DISTIL_RECORD"))
    ends = [e for e in log.events("task_end") if e["phase"] == "construction"]
    assert c["world_model_calls"] == sum(e["calls"] for e in ends)
    assert c["failed_attempts"] == sum(e["failures"] for e in ends)
    training_cost = cost["selector_training"]
    assert training_cost["total"]["tokens"] == train_backbone.ledger.total(
        "selector_training").total
    assert training_cost["total"]["llm_calls"] == len(train_backbone.calls)
    assert set(training_cost["per_seed"]) == {"0", "1"}
    for parts in training_cost["per_seed"].values():
        assert parts["train"]["tokens"] > 0 and parts["validation"]["tasks"] >= 2
    assert cost["total"]["tokens"] == c["tokens"] + training_cost["total"]["tokens"]


def test_reflexion_reflections_are_charged_to_their_decision(people_benchmark):
    tasks, evaluator, domain = people_benchmark
    fake = scripted()
    fake.rules.insert(0, Rule("REFLECTION: use >= for 'at least'", template="REFLEXION_REFLECT"))
    seen = []

    class Spy(Augmentation):
        async def observe(self, ctx, draft, info, outcome, previous_utility):
            seen.append(ctx.tokens - ctx.decision_tokens_start)  # the decision's token cost
            return {}
    agent = Agent(fake, evaluator, domain, agent_config(kind="reflexion", max_attempts=2))
    ctx = asyncio.run(agent.run(tasks[0], Spy(), phase="evaluation", run="base"))
    by_decision = fake.ledger.by_decision
    assert seen == [by_decision["base/b1#0"].total, by_decision["base/b1#1"].total]
    reflection = fake.ledger.by_purpose["REFLEXION_REFLECT"].total
    assert reflection > 0 and seen[0] > reflection
    assert ctx.tokens == sum(seen) and ctx.llm_calls == len(fake.calls) == 3


def test_llm_calls_made_through_a_task_context_are_booked_on_it(people_benchmark):
    """The hook for other per-decision LLM calls (e.g. a condition judge): ``Agent.chat``."""
    tasks, evaluator, domain = people_benchmark
    fake = scripted().add("YES", template="CONDITION_JUDGE")
    seen = []

    class Judging(Augmentation):
        async def decide(self, ctx, draft):
            await agent.chat(ctx, [{"role": "user", "content": "Does it hold?"}],
                             SamplingParams(max_tokens=8), purpose="CONDITION_JUDGE")
            return await super().decide(ctx, draft)

        async def observe(self, ctx, draft, info, outcome, previous_utility):
            seen.append(ctx.tokens - ctx.decision_tokens_start)
            return {}
    agent = Agent(fake, evaluator, domain, agent_config(max_attempts=1))
    ctx = asyncio.run(agent.run(tasks[0], Judging(), phase="evaluation", run="r"))
    judge = fake.ledger.by_purpose["CONDITION_JUDGE"].total
    assert judge > 0 and ctx.llm_calls == 2
    assert seen == [fake.ledger.by_decision["r/b1#0"].total] and ctx.tokens == seen[0]


def test_bootstrap_interval_is_seeded_and_two_level():
    rng = np.random.default_rng(0)
    values = (rng.random((3, 40)) < 0.5) * 100.0
    a, b = intervals.summarize(values), intervals.summarize(values)
    assert a == b  # seeded
    assert a["ci95"][0] < a["mean"] < a["ci95"][1]
    assert a["std"] == pytest.approx(values.mean(1).std(ddof=1))
    assert intervals.summarize(np.full((2, 5), 40.0))["ci95"] == [40.0, 40.0]
    one = intervals.summarize(values[:1])  # one seed: a plain task bootstrap
    assert one["std"] is None
    scipy_stats = pytest.importorskip("scipy.stats")
    ref = scipy_stats.bootstrap((values[0],), np.mean, n_resamples=10_000, method="percentile",
                                random_state=1).confidence_interval
    assert one["ci95"] == pytest.approx([ref.low, ref.high], abs=3.0)
    # Seeds that disagree widen the interval; identical seeds do not narrow it (the tasks are
    # shared, not new): two copies of one seed give that seed's own task interval.
    split = np.concatenate([np.zeros((1, 40)), np.full((1, 40), 100.0)])
    assert intervals.summarize(split)["ci95"] == [0.0, 100.0]
    twice = intervals.summarize(np.concatenate([values[:1], values[:1]]))
    assert twice["ci95"] == pytest.approx(one["ci95"], abs=2.5)


def test_construction_spending_outside_any_task_is_in_the_cost_of_building():
    """A baseline's work after its last construction task (ExpeL's final insight update) is
    logged as a ``baseline_memory`` event without a task id; it is part of building's cost."""
    ends = [{"phase": "construction", "run": "build", "task_id": "b1", "tokens": 100,
             "llm_calls": 2, "calls": 1, "failures": 0}]
    tail = [{"phase": "construction", "run": "build-expel", "task_id": "", "tokens": 40}]
    cost = metrics.building_cost(ends, tail)
    assert cost["construction"]["tokens"] == 140 and cost["construction"]["llm_calls"] == 3
    assert cost["construction"]["tasks"] == 1 and cost["total"]["tokens"] == 140
    assert metrics.building_cost(ends)["construction"]["tokens"] == 100


class _CountingInFlight(Backbone):
    """The scripted backbone, answering after a short wait; counts the calls in flight (each task
    has at most one), per run too."""

    def __init__(self, inner):
        super().__init__(inner.ledger)
        self.inner, self.now, self.peak, self.runs_at_peak = inner, {}, 0, 0

    async def chat(self, messages, params=SamplingParams(), charge=Charge()):
        run = charge.decision.rsplit("/", 1)[0]
        self.now[run] = self.now.get(run, 0) + 1
        if sum(self.now.values()) > self.peak:
            self.peak = sum(self.now.values())
            self.runs_at_peak = sum(1 for n in self.now.values() if n)
        try:
            await asyncio.sleep(0.02)
            return await self.inner.chat(messages, params, charge)
        finally:
            self.now[run] -= 1

    async def _chat(self, messages, params):  # pragma: no cover - chat() is overridden
        raise NotImplementedError


def test_evaluation_metrics_do_not_depend_on_tasks_in_flight(tmp_path, people_benchmark):
    """Concurrency never changes a result: one task at a time and many in flight (all runs in one
    pool) give the same per-seed metrics, aggregate, cost blocks and per-run metrics files from
    the same store and selectors; the runs (base, seed 0, seed 1) share the pool, which counts
    evaluation tasks with all their runs: more task runs are in flight at once than one run has."""
    cfg, wd, _ = _build_and_train(tmp_path, people_benchmark)
    results, per_run, peaks = {}, {}, {}
    for concurrency in (1, 8):
        copy = tmp_path / f"wd_c{concurrency}"
        shutil.copytree(wd, copy, ignore=shutil.ignore_patterns(".locks"))
        cfg.eval.concurrency = concurrency
        backbone = _CountingInFlight(scripted())
        results[concurrency] = experiment.evaluate(cfg, copy, backbone=backbone,
                                                   benchmark=people_benchmark)
        per_run[concurrency] = {p.parent.name: json.loads(p.read_text())["metrics"]
                                for p in (copy / "eval").glob("*/metrics.json")}
        peaks[concurrency] = (backbone.peak, backbone.runs_at_peak)
    for key in ("base", "aggregate", "cost_of_building", "evaluation_cost"):
        assert results[1][key] == results[8][key], key
    assert sorted(per_run[8]) == ["base", "countermem-dqn-seed0", "countermem-dqn-seed1"]
    assert per_run[1] == per_run[8]
    tasks_per_run = len(MANIFEST["eval"])
    assert peaks[1] == (3, 3)  # one evaluation task in flight, with its three runs
    assert peaks[8][0] > tasks_per_run and peaks[8][1] > 1, peaks
