"""Lean / Dafny / Verus adapters. Dafny runs for real on Debian's Dafny 2.3 (the labelled legacy
backend); Lean and Verus run against small fake executables that replay recorded outputs."""
import os
import pathlib
import shutil

import pytest

from evaluators.base import Task
from evaluators.formal import loaders, tools
from evaluators.formal.checkers import (DafnyEvaluator, LeanEvaluator, LeanReference,
                                        ProgramReference, VerusEvaluator, assemble_vericoding)

FAKE_BIN = pathlib.Path(__file__).parent / "fake_bin"
GT = "dafnybench/DafnyBench/dataset/ground_truth"
HR = "dafnybench/DafnyBench/dataset/hints_removed"


@pytest.fixture
def fake_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")


def _task(ref, benchmark="t"):
    return Task("t/1", "formal", benchmark, "", "", "unit", reference=ref)


needs_dafny = pytest.mark.skipif(shutil.which("dafny") is None, reason="Debian dafny not installed")


@needs_dafny
@pytest.mark.parametrize("name", ["Clover_is_even", "Clover_linear_search1",
                                  "dafny-synthesis_task_id_435"])
def test_legacy_dafny_accepts_ground_truth(benchdata, name):
    truth = (benchdata / GT / f"{name}.dfy").read_text()
    hints_removed = (benchdata / HR / f"{name}_no_hints.dfy").read_text()
    evaluator = DafnyEvaluator(legacy=True, timeout_s=120)
    assert evaluator.name == "dafny-2.3-legacy"
    outcome = evaluator.evaluate(evaluator.reset(_task(ProgramReference(hints_removed, "whole",
                                                                         "dafny"))), truth)
    assert outcome.success and outcome.utility == 1.0, outcome.feedback


@needs_dafny
def test_legacy_dafny_rejects_missing_and_broken_invariants(benchdata):
    truth = (benchdata / GT / "Clover_linear_search1.dfy").read_text()
    hints_removed = (benchdata / HR / "Clover_linear_search1_no_hints.dfy").read_text()
    evaluator = DafnyEvaluator(legacy=True, timeout_s=120)
    task = _task(ProgramReference(hints_removed, "whole", "dafny"))
    bare = evaluator.evaluate(evaluator.reset(task), hints_removed)
    assert bare.completed and not bare.success and bare.details["errors"] >= 1
    broken = truth.replace("invariant forall i::0<=i<n ==> e!=a[i]",
                           "invariant forall i::0<=i<=n ==> e!=a[i]")
    assert broken != truth
    outcome = evaluator.evaluate(evaluator.reset(task), broken)
    assert outcome.completed and not outcome.success and outcome.utility < 1.0
    assert "error" in outcome.feedback.lower()


@needs_dafny
def test_dafny_feedback_names_no_temporary_directory(benchdata):
    hints_removed = (benchdata / HR / "Clover_linear_search1_no_hints.dfy").read_text()
    evaluator = DafnyEvaluator(legacy=True, timeout_s=120)
    task = _task(ProgramReference(hints_removed, "whole", "dafny"))
    feedback = evaluator.evaluate(evaluator.reset(task), hints_removed).feedback
    # the same on every host and run: it goes into prompts and a record's evidence
    assert "task.dfy(" in feedback and "countermem-verify" not in feedback, feedback


@needs_dafny
def test_dafny_refuses_weakened_specifications(benchdata):
    truth = (benchdata / GT / "Clover_linear_search1.dfy").read_text()
    hints_removed = (benchdata / HR / "Clover_linear_search1_no_hints.dfy").read_text()
    evaluator = DafnyEvaluator(legacy=True)
    task = _task(ProgramReference(hints_removed, "whole", "dafny"))
    dropped = truth.replace("  ensures forall i::0<=i < n ==> e!=a[i]\n", "")
    assert "specification was changed" in evaluator.evaluate(evaluator.reset(task), dropped).feedback
    assumed = truth.replace("n :=0;", "n :=0; assume false;")
    assert "may not assume" in evaluator.evaluate(evaluator.reset(task), assumed).feedback


def test_missing_binary_says_how_to_install():
    with pytest.raises(tools.ToolMissing, match="install Dafny 4"):
        DafnyEvaluator(command=("/nonexistent/dafny", "verify"))
    with pytest.raises(tools.ToolMissing, match="install Lean 4 with elan"):
        LeanEvaluator(command=("/nonexistent/lake", "env", "lean"))
    with pytest.raises(tools.ToolMissing, match="install Verus"):
        VerusEvaluator(command=("/nonexistent/verus",))


LEAN_REF = LeanReference("import Mathlib", "theorem t (x y : ℤ) (h₀ : 0 < y) : x = 26 := by", "")


@pytest.mark.parametrize("proof,ok,needle", [
    ("nlinarith [sq_nonneg (x - y)]", True, "accepted"),
    ("linarith", False, "linarith failed"),
    ("simp", False, "unsolved goals"),
])
def test_lean_adapter_parses_recorded_outputs(fake_path, tmp_path, proof, ok, needle):
    evaluator = LeanEvaluator(timeout_s=20)
    outcome = evaluator.evaluate(evaluator.reset(_task(LEAN_REF)), proof)
    assert outcome.completed and outcome.success == ok and needle in outcome.feedback


def test_lean_adapter_refuses_sorry_and_times_out(fake_path):
    evaluator = LeanEvaluator(timeout_s=1)
    assert "may not use sorry" in evaluator.evaluate(evaluator.reset(_task(LEAN_REF)),
                                                     "sorry").feedback
    slow = evaluator.evaluate(evaluator.reset(_task(LEAN_REF)), "sleep_forever")
    assert not slow.completed and slow.reason == "timeout"


def test_verus_adapter_parses_recorded_outputs(fake_path, benchdata):
    files = sorted((benchdata / "vericoding/benchmarks/verus/humaneval/files").glob("*.rs"))
    template = next(f.read_text() for f in files if "<vc-code>" in f.read_text())
    evaluator = VerusEvaluator(timeout_s=20)
    task = _task(ProgramReference(template, "vc-code", "verus"))
    good = evaluator.evaluate(evaluator.reset(task), "let mut i = 0;\nwhile i < n { i += 1; }")
    assert good.success and good.details == {"verified": 2, "errors": 0}
    bad = evaluator.evaluate(evaluator.reset(task), "unimplemented!()")
    assert bad.completed and not bad.success and bad.utility == 0.5
    assert "postcondition not satisfied" in bad.feedback
    cheat = evaluator.evaluate(evaluator.reset(task), "assume(false);")
    assert "may not assume" in cheat.feedback


def test_assemble_vericoding_fills_the_code_section():
    template = "// <vc-spec>\nfn f()\n// </vc-spec>\n// <vc-code>\n{ assume(false); }\n// </vc-code>\n"
    out = assemble_vericoding(template, "{ 42 }")
    assert "{ 42 }" in out and "assume(false)" not in out and "fn f()" in out


def test_loaders_read_the_shared_files(benchdata):
    minif2f = loaders.load_lean_jsonl(benchdata / "minif2f/deepseek_prover_v1.5/minif2f.jsonl",
                                      "minif2f", split="test")
    assert len(minif2f) == 244 and minif2f[0].decision_unit == "tactic / proof step"
    files = loaders.load_minif2f_lean_files(benchdata / "minif2f/yangky11_miniF2F-lean4", "Test")
    assert len(files) == 244 and files[0].reference.statement.endswith(":= by")
    proofnet = loaders.load_lean_jsonl(benchdata / "proofnet/proofnet.jsonl", "proofnet")
    assert len(proofnet) >= 300
    dafny = loaders.load_dafnybench(benchdata / "dafnybench/DafnyBench/dataset")
    assert len(dafny) >= 700 and dafny[0].decision_unit == "invariant / annotation"
    vd = loaders.load_vericoding(benchdata / "vericoding/benchmarks", "dafny", limit=5)
    vv = loaders.load_vericoding(benchdata / "vericoding/benchmarks", "verus", limit=5)
    assert vd and vv and all(t.reference.mode == "vc-code" for t in vd + vv)
    with pytest.raises(loaders.DataError, match="file not found"):
        loaders.load_lean_jsonl(benchdata / "nope.jsonl", "x")
