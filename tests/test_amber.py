"""AMBER: the loader reads the construction-verification layout, and the checker enforces the
workflow (a proof about a construction left abstract fails) before replaying recorded Lean runs."""
import os
import pathlib

import pytest

from evaluators.formal import amber
from helpers import paper_config

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "amber" / "amber.jsonl"
FAKE_BIN = pathlib.Path(__file__).parent / "fake_bin"

GOOD = """noncomputable def qp_solution (a b : ℝ) : ℝ := b / a

theorem qp_solution_is_min (a b : ℝ) (ha : 0 < a) (x : ℝ) :
    a / 2 * qp_solution a b ^ 2 - b * qp_solution a b ≤ a / 2 * x ^ 2 - b * x := by
  unfold qp_solution
  have h : 0 ≤ (a * x - b) ^ 2 := sq_nonneg _
  field_simp
  rw [div_le_div_iff (by positivity) (by positivity)]
  nlinarith [sq_nonneg (a * x - b), ha]
"""


@pytest.fixture
def tasks():
    return amber.load_amber(FIXTURE)


@pytest.fixture
def lean(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    return amber.AmberEvaluator(timeout_s=20)


def _check(evaluator, task, answer):
    return evaluator.evaluate(evaluator.reset(task), answer)


def test_loader_reads_constructions_and_theorems(tasks):
    assert [t.task_id for t in tasks] == ["amber/qp_unconstrained_1d", "amber/gd_step_quadratic"]
    assert tasks[0].reference.construction == ("qp_solution",)       # found from `:= sorry`
    assert tasks[1].reference.construction == ("gd_update",)         # given explicitly
    assert "qp_solution_is_min" in tasks[0].prompt and tasks[0].decision_unit == \
        "tactic / lemma choice"
    assert tasks[1].features == {"area": "optimization", "task_type": "algorithm"}


def test_loader_rejects_rows_without_a_construction(tmp_path):
    path = tmp_path / "amber.jsonl"
    path.write_text('{"id": "x", "header": "", "formal_statement": "theorem t : 1 = 1 := by sorry"}\n')
    with pytest.raises(amber.DataError, match="no construction"):
        amber.load_amber(path)


@pytest.mark.parametrize("answer,needle", [
    (GOOD.replace(":= b / a", ":= sorry", 1), "sorry"),
    (GOOD.replace("noncomputable def qp_solution (a b : ℝ) : ℝ := b / a",
                  "opaque qp_solution (a b : ℝ) : ℝ"), "defined explicitly"),
    (GOOD.replace(":= b / a", ":= Classical.choose (exists_minimizer a b)", 1), "existence proof"),
    (GOOD.replace("≤ a / 2 * x ^ 2", "≤ a * x ^ 2", 1), "statement or signature"),
    (GOOD.replace("(a b : ℝ) : ℝ := b / a", "(a b c : ℝ) : ℝ := b / a", 1),
     "statement or signature"),
    ("opaque helper : ℝ\n" + GOOD.replace(":= b / a", ":= helper", 1), "without a definition"),
])
def test_workflow_violations_fail_without_running_lean(tasks, lean, answer, needle):
    outcome = _check(lean, tasks[0], answer)
    assert not outcome.success and outcome.completed and needle in outcome.feedback
    assert outcome.details.get("workflow")


def test_the_problem_s_own_definitions_may_not_change(tasks, lean):
    answer = tasks[1].reference.formal_statement.replace("def gd_update (x : ℝ) : ℝ := sorry",
                                                         "def gd_update (x : ℝ) : ℝ := x / 2")
    honest = answer.replace(":= by sorry", ":= by\n  simp [gd_iter, gd_update]")
    assert amber.workflow_violation(tasks[1].reference, honest) == ""
    rigged = honest.replace("| n + 1 => gd_update (gd_iter x0 n)", "| n + 1 => gd_iter x0 n / 2")
    outcome = _check(lean, tasks[1], rigged)
    assert not outcome.success and "gd_iter" in outcome.feedback


def test_explicit_construction_with_its_proof_passes_recorded_lean(tasks, lean):
    outcome = _check(lean, tasks[0], GOOD)
    assert outcome.success and outcome.utility == 1.0, outcome.feedback
    assert outcome.feedback == "Solution accepted by Lean."


def test_wrong_construction_fails_in_lean(tasks, lean):
    wrong = GOOD.replace(":= b / a", ":= b", 1).replace("nlinarith [sq_nonneg (a * x - b), ha]",
                                                         "linarith")
    outcome = _check(lean, tasks[0], wrong)
    assert not outcome.success and "linarith failed" in outcome.feedback


def test_registered_benchmark_reads_the_fixture(monkeypatch):
    from countermem_jax import domains
    cfg = paper_config("amber,react,gptoss").data
    cfg.data_dir = str(FIXTURE)
    assert len(domains.get("amber").tasks(cfg)) == 2
