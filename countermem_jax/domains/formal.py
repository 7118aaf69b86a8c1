"""Math and formal verification (miniF2F, ProofNet, AMBER on Lean 4; DafnyBench, Vericoding on
Dafny and Verus; paper Appendix D.1): their domains, rule edit operators of Module I (paper §3.2,
Appendix B.4) and loaders.

Lean: one closing tactic swapped within the arithmetic family, or hypotheses added. Dafny / Verus:
one loop invariant or assertion edited, dropped or added; never a specification line.
"""
import dataclasses
import re

from countermem_jax.domains.base import Domain, data_dir, require
from countermem_jax.runtime.paths import data_root

CLOSING_TACTICS = ("simp", "linarith", "nlinarith", "omega", "norm_num", "positivity")
# Whole tactic names only: ``nlinarith`` holds no ``linarith`` and ``simp_all`` no ``simp``.
_TACTIC = re.compile(r"\b(" + "|".join(CLOSING_TACTICS) + r")\b(?!_)")
# A binder ``(x y : ℝ)`` of a number type: the variables a nonlinear hint may square.
_BINDER = re.compile(r"\(\s*([^():]+?)\s*:\s*[^()]*?(?:ℝ|ℤ|ℕ|ℚ|Real|Int|Nat|Rat)\s*\)")
_FLIP = {"<=": "<", "<": "<=", ">=": ">", ">": ">=", "≤": "<", "≥": ">"}
# A comparison operator, but not part of ``==>``, ``<==>``, ``<==``, ``<<``, ``>>`` or ``->``:
# implications and shifts are not boundaries.
_CMP = re.compile(r"<=(?![=>])|(?<![=<])>=|≤|≥|(?<![<>=-])<(?![=<>])|(?<![<>=-])>(?![=>])")
_ANNOTATION = re.compile(r"^\s*(invariant|assert|decreases)\b")


def _dedupe(original: str, candidates, limit: int) -> list[str]:
    """At most ``limit`` distinct non-blank candidates that differ from ``original``."""
    out = []
    for c in candidates:
        if c.strip() and c.strip() != original.strip() and c not in out:
            out.append(c)
        if len(out) >= limit:
            break
    return out


def _variables(statement: str) -> list[str]:
    """The names bound with a number type in a Lean statement, in order."""
    names = []
    for group in _BINDER.findall(statement):
        names += [n for n in group.split() if re.fullmatch(r"[^\W\d]\w*", n)]
    return list(dict.fromkeys(names))


def tactic_substitutions(proof: str) -> list[str]:
    """Each occurrence of a closing tactic replaced by each other closing tactic."""
    out = []
    for m in _TACTIC.finditer(proof):
        for other in CLOSING_TACTICS:
            if other != m.group(1):
                out.append(proof[:m.start()] + other + proof[m.end():])
    return out


def hypothesis_additions(proof: str, statement: str) -> list[str]:
    """Hint terms for (n)linarith from the statement's variables, and simp over all hypotheses."""
    names = _variables(statement)
    # sq_nonneg (a - b) for each pair, then sq_nonneg a: the usual hint terms that let
    # nlinarith prove a polynomial inequality (at most three are tried per call site).
    hints = [f"sq_nonneg ({a} - {b})" for i, a in enumerate(names) for b in names[i + 1:]]
    hints += [f"sq_nonneg {a}" for a in names]
    out = []
    for m in re.finditer(r"\b(n?linarith)\b(\s*\[[^\]]*\])?", proof):
        existing = m.group(2)
        for hint in hints[:3]:
            inner = f"{existing.strip()[1:-1]}, {hint}" if existing else hint
            out.append(proof[:m.start()] + f"nlinarith [{inner.lstrip(', ')}]" + proof[m.end():])
    # ``simp [*] at *`` inserted before the last line, at its indentation, so it runs inside the
    # same tactic block.
    lines = proof.rstrip().splitlines() or [""]
    indent = re.match(r"\s*", lines[-1]).group(0)
    out.append("\n".join(lines[:-1] + [f"{indent}simp [*] at *", lines[-1]]))
    return out


def lean_edits(task, action: str, limit: int = 8) -> list[str]:
    """Lean tactic substitutions, then hypothesis additions (a proof step changes at a time)."""
    statement = getattr(task.reference, "statement", "") or task.context
    variants = tactic_substitutions(action) + hypothesis_additions(action, statement)
    return _dedupe(action, variants, limit)


def amber_edits(task, action: str, limit: int = 8) -> list[str]:
    """AMBER solutions hold the construction and its proofs; only the proofs' tactics are edited
    (the construction is the agent's answer and is not a tactic)."""
    statement = getattr(task.reference, "formal_statement", "") or task.context
    # [:-1] drops the ``simp [*] at *`` insertion: the last line of a whole AMBER solution need
    # not be inside a tactic proof.
    variants = tactic_substitutions(action) + hypothesis_additions(action, statement)[:-1]
    return _dedupe(action, variants, limit)


def _annotation_variants(program: str, bound_invariant: str) -> list[str]:
    """One annotation's comparison flipped, one annotation dropped, or the bound invariant of a
    ``while i < n`` loop added (written with ``bound_invariant``)."""
    lines = program.splitlines()
    out = []
    in_block = False    # inside a Verus ``invariant`` clause list written one clause per line
    for i, line in enumerate(lines):
        stripped = line.strip()
        clause = in_block and stripped and not re.match(r"[{}]|(ensures|requires|decreases)\b",
                                                         stripped)
        in_block = stripped == "invariant" or bool(clause and stripped.endswith(","))
        if not (_ANNOTATION.match(line) or clause):
            continue
        for m in _CMP.finditer(line):
            flipped = line[:m.start()] + _FLIP[m.group(0)] + line[m.end():]
            out.append("\n".join(lines[:i] + [flipped] + lines[i + 1:]))
        if not line.lstrip().startswith("decreases") and stripped != "invariant":
            out.append("\n".join(lines[:i] + lines[i + 1:]))
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)while\s*\(?\s*(\w+)\s*<\s*([^{)]+?)\s*\)?\s*(\{|$)", line)
        if m:
            indent, var, bound = m.group(1), m.group(2), m.group(3).strip().rstrip(",")
            new = bound_invariant.format(indent=indent + "  ", var=var, bound=bound)
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if new.strip().endswith(",") and nxt.lstrip().startswith("invariant"):
                # Verus: one ``invariant`` clause list per loop; add to it instead.
                clause = new.strip()[len("invariant"):].strip()
                at = re.match(r"\s*", nxt).group(0) + "    "
                if clause not in program:
                    out.append("\n".join(lines[:i + 2] + [at + clause] + lines[i + 2:]))
            elif new.strip() not in program:
                out.append("\n".join(lines[:i + 1] + [new] + lines[i + 1:]))
    return out


def dafny_edits(task, action: str, limit: int = 8) -> list[str]:
    """Invariant / assertion edits of a Dafny program or method body."""
    return _dedupe(action, _annotation_variants(action, "{indent}invariant 0 <= {var} <= {bound}"),
                   limit)


def verus_edits(task, action: str, limit: int = 8) -> list[str]:
    """Invariant / assertion edits of a Verus body (``invariant`` clauses end with commas)."""
    return _dedupe(action, _annotation_variants(action, "{indent}invariant 0 <= {var} <= {bound},"),
                   limit)


LEAN = Domain("math", "Write only the tactic proof that follows ':= by', in a ```lean code block.",
              "A condition may test 'split == <name>'.", lean_edits)

AMBER = Domain(
    "math", "Write the whole Lean 4 solution in a ```lean code block: first the construction "
    "(replace every `sorry` in the definitions by an explicit term), then the proofs of the "
    "theorems about it. Do not change any theorem statement.",
    "A condition may test 'task_type == <evaluation|algorithm|representation|proof>' or "
    "'area == <name>'.", amber_edits)

DAFNY = Domain("formal", "Write the whole program in a ```dafny code block.",
               "A condition may test 'source == <name>'.", dafny_edits)

VERUS = Domain("formal", "Write the function body (the <vc-code> section) in a ```rust code block.",
               "A condition may test 'source == <name>'.", verus_edits)

VERICODING_DAFNY = Domain(
    "formal", "Write the method body (the <vc-code> section) in a ```dafny code block.",
    "A condition may test 'source == <name>'.", dafny_edits)


# --- Loaders ---------------------------------------------------------------------------------

def _with_unit(tasks, unit: str):
    """Tasks labelled with the setting's decision unit where the loader uses a narrower label."""
    return [t if t.decision_unit == unit else dataclasses.replace(t, decision_unit=unit)
            for t in tasks]


def lean_jsonl_tasks(name: str, default: str, unit: str):
    """A loader of a Lean benchmark in the prover JSONL layout (miniF2F, ProofNet), labelled with
    the setting's decision unit."""
    def tasks(data_cfg):
        from evaluators.formal.loaders import load_lean_jsonl
        path = require(data_cfg.get("data_dir") or data_root() / default, name, f"{name} JSONL")
        return _with_unit(load_lean_jsonl(path, name, data_cfg.get("lean_split") or None,
                                          data_cfg.get("lean_project", "")), unit)
    return tasks


def lean_evaluator(data_cfg):
    """The Lean 4 kernel checker (needs Lean + Mathlib, third_party/README.md)."""
    from evaluators.formal.checkers import LeanEvaluator
    return LeanEvaluator()


def amber_tasks(data_cfg):
    """AMBER's construction-and-proof tasks."""
    from evaluators.formal.amber import load_amber
    path = require(data_cfg.get("data_dir") or data_root() / "amber/amber.jsonl", "amber",
                   "AMBER tasks (amber.jsonl)")
    return load_amber(path, data_cfg.get("lean_project", ""))


def amber_evaluator(data_cfg):
    """AMBER's Lean-based construction-verification checker."""
    from evaluators.formal.amber import AmberEvaluator
    return AmberEvaluator()


def dafny_evaluator(data_cfg):
    """The Dafny verifier (``dafny_legacy`` selects Dafny 2.3, labelled as such)."""
    from evaluators.formal.checkers import DafnyEvaluator
    return DafnyEvaluator(legacy=data_cfg.get("dafny_legacy", False))


def verus_evaluator(data_cfg):
    """The Verus verifier."""
    from evaluators.formal.checkers import VerusEvaluator
    return VerusEvaluator()


def dafnybench_tasks(data_cfg):
    """DafnyBench programs with their annotations removed."""
    from evaluators.formal.loaders import load_dafnybench
    return load_dafnybench(require(data_dir(data_cfg, "dafnybench/DafnyBench/dataset"),
                                   "dafnybench", "DafnyBench dataset"))


def vericoding_tasks(language: str):
    """A loader of the Vericoding tasks in ``language`` ("dafny" or "verus")."""
    def tasks(data_cfg):
        from evaluators.formal.loaders import load_vericoding
        root = require(data_dir(data_cfg, "vericoding/benchmarks"), f"vericoding_{language}",
                       "Vericoding benchmarks")
        return load_vericoding(root, language,
                               tuple(data_cfg.get("vericoding_sources") or ()) or None)
    return tasks
