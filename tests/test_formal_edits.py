"""Rule edit operators for Lean, Dafny and Verus (Module I): one decision unit changed
per variant, reachable through each registered benchmark's domain."""
import types

from countermem_jax import domains
from countermem_jax.domains import formal
from evaluators.formal.checkers import LeanReference

STATEMENT = "theorem t (x y : ℝ) (h₀ : 0 < y) : x ^ 2 + y ^ 2 ≥ 2 * x * y := by"


def _lean_task():
    return types.SimpleNamespace(reference=LeanReference("import Mathlib", STATEMENT), context="")


def test_lean_tactic_substitutions_and_hypothesis_additions():
    variants = formal.lean_edits(_lean_task(), "nlinarith", limit=20)
    assert {"simp", "linarith", "omega", "norm_num", "positivity"} <= set(variants)
    assert "nlinarith [sq_nonneg (x - y)]" in variants           # hint from the statement
    assert "simp [*] at *\nnlinarith" in variants                 # hypotheses into the context
    assert "nlinarith" not in variants and len(variants) == len(set(variants))


def test_lean_edits_change_one_step_of_a_longer_proof():
    proof = "have h := sq_nonneg (x - y)\nlinarith [h]"
    variants = formal.lean_edits(_lean_task(), proof, limit=20)
    assert "have h := sq_nonneg (x - y)\nnlinarith [h]" in variants
    assert "have h := sq_nonneg (x - y)\nnlinarith [h, sq_nonneg (x - y)]" in variants
    assert all(v.startswith("have h := sq_nonneg (x - y)") or v.startswith("simp")
               for v in variants)


DAFNY = """method Sum(a: array<int>) returns (s: int)
  ensures s >= 0
{
  var i := 0;
  s := 0;
  while i < a.Length
    invariant i <= a.Length
  {
    s := s + 1;
    i := i + 1;
  }
  assert s >= 0;
}"""


def test_dafny_edits_touch_only_invariants_and_assertions():
    variants = formal.dafny_edits(None, DAFNY, limit=20)
    assert DAFNY.replace("invariant i <= a.Length", "invariant i < a.Length") in variants
    assert DAFNY.replace("    invariant i <= a.Length\n", "") in variants          # dropped
    assert DAFNY.replace("assert s >= 0;", "assert s > 0;") in variants
    added = DAFNY.replace("while i < a.Length\n", "while i < a.Length\n    invariant 0 <= i <= a.Length\n")
    assert added in variants
    for v in variants:                                  # the specification is never edited
        assert "  ensures s >= 0" in v and "method Sum(a: array<int>) returns (s: int)" in v


def test_verus_edits_add_comma_terminated_invariants():
    body = "let mut i = 0;\nwhile i < n\n{\n    i = i + 1;\n}"
    variants = formal.verus_edits(None, body)
    assert "let mut i = 0;\nwhile i < n\n  invariant 0 <= i <= n,\n{\n    i = i + 1;\n}" in variants
    block = "while i < n\n    invariant\n        i <= n,\n{\n    i = i + 1;\n}"
    variants = formal.verus_edits(None, block)
    assert block.replace("    invariant\n", "    invariant\n        0 <= i <= n,\n") in variants
    assert block.replace("i <= n,", "i < n,") in variants


def test_registered_domains_dispatch_to_the_formal_operators():
    assert domains.get("minif2f").domain.rule_edits(_lean_task(), "linarith")
    assert domains.get("proofnet").domain is domains.LEAN
    assert domains.get("dafnybench").domain.rule_edits(None, DAFNY)
    assert domains.get("vericoding_verus").domain is domains.VERUS
    assert domains.get("amber").domain.rule_edits(
        types.SimpleNamespace(reference=types.SimpleNamespace(formal_statement=STATEMENT),
                              context=""), "def f := 1\ntheorem t : f = 1 := by\n  simp [f]")


def test_implications_and_equivalences_are_not_comparisons():
    body = "while i < n\n    invariant\n        i < n ==> a[i] >= 0,\n        (x <==> y),\n{\n}"
    variants = formal.verus_edits(None, body, limit=20)
    flipped = [v for v in variants if v.count("\n") == body.count("\n")]
    assert body.replace("i < n ==>", "i <= n ==>") in flipped
    assert body.replace("a[i] >= 0", "a[i] > 0") in flipped
    assert all("<==>" in v for v in flipped) and all("==>" in v for v in flipped)
    assert not any(bad in v.replace("<==>", "").replace("==>", "")
                   for v in variants for bad in ("<=>", "=>"))
