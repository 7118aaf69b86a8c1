"""AMBER (Yang et al. 2026, arXiv 2602.01291): Lean 4 construction-verification tasks in applied
mathematics. The agent must first *define* the solution (a value, an algorithm's update map, a
transformed representation) as explicit Lean definitions, then *prove* the stated properties of
that construction (paper Appendix D.1: Lean-based checker, pass rate, tactic / lemma choice).

``AmberEvaluator`` refuses, before Lean runs, an answer that changes a theorem statement or a
construction signature, leaves a construction abstract (``sorry``, ``opaque``, ``axiom``, a
``Classical.choose``) or uses ``sorry`` / ``admit`` / new axioms. Layout: docs/data.md.
"""
import dataclasses
import json
import pathlib
import re

from evaluators.base import InputError, Outcome, Task
from evaluators.formal.checkers import LeanEvaluator

_DECL = re.compile(r"^(?:@\[[^\]]*\]\s*)?(?:noncomputable\s+)?(?:private\s+)?"
                   r"(def|abbrev|theorem|lemma|opaque|axiom|instance)\s+([^\s:({\[]+)", re.M)
_NONCONSTRUCTIVE = re.compile(r"\b(Classical\.choose|Classical\.epsilon|Exists\.choose|"
                              r"Classical\.indefiniteDescription|Nonempty\.some)\b")


class DataError(InputError, ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class AmberReference:
    header: str
    formal_statement: str
    construction: tuple[str, ...]
    project_dir: str = ""


def _squash(text: str) -> str:
    return " ".join(text.split())


def declarations(source: str) -> dict[str, tuple[str, str, str]]:
    """name -> (kind, signature after the name up to ':=', body) per top-level declaration."""
    hits = list(_DECL.finditer(source))
    out = {}
    for i, m in enumerate(hits):
        end = hits[i + 1].start() if i + 1 < len(hits) else len(source)
        sig, _, body = source[m.end():end].partition(":=")
        out[m.group(2)] = (m.group(1), sig, body.strip())
    return out


def _constructions(statement: str) -> tuple[str, ...]:
    return tuple(name for name, (kind, _, body) in declarations(statement).items()
                 if kind in ("def", "abbrev") and re.fullmatch(r"(by\s+)?sorry", body))


def load_amber(path, project_dir: str = "") -> list[Task]:
    """AMBER tasks from ``amber.jsonl`` (layout above)."""
    path = pathlib.Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    tasks = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
        for key in ("id", "header", "formal_statement"):
            if key not in row:
                raise DataError(f"{path}:{lineno}: missing field {key!r}")
        construction = tuple(row.get("construction") or _constructions(row["formal_statement"]))
        if not construction:
            raise DataError(f"{path}:{lineno}: no construction to define (no def with a sorry "
                            "body and no 'construction' field)")
        theorems = [n for n, (k, _, _) in declarations(row["formal_statement"]).items()
                    if k in ("theorem", "lemma")]
        if not theorems:
            raise DataError(f"{path}:{lineno}: no theorem to prove")
        tasks.append(Task(
            task_id=f"amber/{row['id']}", domain="math", benchmark="amber",
            prompt="Construction-verification task in Lean 4: define "
                   f"{', '.join(construction)} explicitly (no sorry), then prove "
                   f"{', '.join(theorems)} about your construction.\n{row.get('informal', '')}",
            context=row["formal_statement"], decision_unit="tactic / lemma choice",
            environment=row.get("area", "amber"),
            reference=AmberReference(row["header"], row["formal_statement"], construction,
                                     project_dir),
            features={"area": row.get("area", ""), "task_type": row.get("task_type", "")}))
    return tasks


def workflow_violation(ref: AmberReference, answer: str) -> str:
    """Why ``answer`` breaks the construction-verification workflow ('' if it does not)."""
    if re.search(r"\b(sorry|admit)\b|^\s*axiom\b", answer, re.M):
        return "The solution may not use sorry, admit or new axioms."
    given = declarations(ref.formal_statement)
    got = declarations(answer)
    for name, (kind, sig, body) in given.items():
        if name not in got:
            return f"The solution must keep the declaration {name}."
        got_kind, got_sig, got_body = got[name]
        if name in ref.construction:
            if got_kind not in ("def", "abbrev"):
                return f"{name} must be defined explicitly (def or abbrev), not left abstract."
            if not got_body:
                return f"{name} has no body: the construction must be given explicitly."
            if _NONCONSTRUCTIVE.search(got_body):
                return (f"{name} is chosen from an existence proof; the construction must be "
                        "explicit.")
        elif (kind in ("theorem", "lemma")) != (got_kind in ("theorem", "lemma")):
            return f"{name} must stay a {kind}."
        elif kind not in ("theorem", "lemma") and _squash(got_body) != _squash(body):
            return f"{name} is part of the problem statement and may not change."
        if _squash(got_sig) != _squash(sig):
            return f"The statement or signature of {name} was changed."
    for name, (kind, _, _) in got.items():
        if kind in ("opaque", "axiom") and name not in given:
            return f"{name} is declared without a definition; the construction must be explicit."
    return ""


class AmberEvaluator(LeanEvaluator):
    """Construction-verification checker: the workflow rules above, then Lean on the file."""
    name = "amber-lean4"
    version = "1"

    def _check(self, task: Task, action: str) -> Outcome:
        ref: AmberReference = task.reference
        problem = workflow_violation(ref, action)
        if problem:
            return Outcome(0.0, False, True, problem, details={"workflow": problem})
        return self.run_source(f"{ref.header}\n\n{action.strip()}\n", ref.project_dir, "solution")
