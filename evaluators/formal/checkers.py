"""Lean 4, Dafny and Verus checkers (paper Appendix D.1)."""
import dataclasses
import os
import pathlib
import re
import tempfile

from evaluators.base import Evaluator, Outcome, Task, truncate
from evaluators.formal import tools


def _spec_lines(text: str) -> list[str]:
    keep = re.compile(r"^\s*(requires|ensures|method|function|predicate|lemma|modifies|reads|"
                      r"decreases)\b")
    return [" ".join(l.split()) for l in text.splitlines() if keep.match(l)]


@dataclasses.dataclass(frozen=True)
class LeanReference:
    header: str
    statement: str           # the theorem up to and including ":= by"
    project_dir: str = ""    # a Lake project (miniF2F) to run in


class LeanEvaluator(Evaluator):
    name = "lean4"
    version = "1"

    def __init__(self, command: tuple[str, ...] = ("lake", "env", "lean"), timeout_s: float = 300):
        tools.require(command[0])  # fail at set-up, with install instructions, not per task
        self.command, self.timeout_s = command, timeout_s

    def _check(self, task: Task, action: str) -> Outcome:
        ref: LeanReference = task.reference
        if re.search(r"\b(sorry|admit)\b|^\s*axiom\b", action, re.M):
            return Outcome(0.0, False, True, "The proof may not use sorry, admit or new axioms.")
        proof = action.strip()
        proof = re.sub(r"^:=\s*by\b", "", proof).strip()
        body = ref.statement.rstrip()
        if body.endswith("sorry"):
            body = body[: -len("sorry")].rstrip()
        source = f"{ref.header}\n\n{body}\n" + "\n".join("  " + l for l in proof.splitlines()) + "\n"
        return self.run_source(source, ref.project_dir, "proof")

    def run_source(self, source: str, project_dir: str, what: str) -> Outcome:
        """Runs Lean on ``source``: U = 1 with no error and no ``sorry``, else 0."""
        cwd = project_dir or tempfile.gettempdir()
        with tempfile.NamedTemporaryFile("w", suffix=".lean", dir=cwd, delete=False,
                                         prefix="countermem_") as f:
            f.write(source)
            path = f.name
        try:
            run = tools.run_tool([*self.command, path], cwd, self.timeout_s)
        finally:
            os.unlink(path)
        if run.timed_out:
            return Outcome(0.0, False, False, f"Lean ran past {self.timeout_s:.0f}s.", reason="timeout")
        errors = [l for l in run.output.splitlines() if ": error" in l or "error:" in l]
        uses_sorry = "declaration uses 'sorry'" in run.output
        ok = run.returncode == 0 and not errors and not uses_sorry
        feedback = f"{what.capitalize()} accepted by Lean." if ok else truncate(
            f"Lean rejected the {what}: " + " | ".join(
                e.split(path)[-1] for e in (errors or run.output.splitlines()[-3:])), 800)
        return Outcome(1.0 if ok else 0.0, ok, True, feedback,
                       details={"errors": len(errors), "sorry": uses_sorry})


_SUMMARY = re.compile(r"verifier finished with (\d+) verified, (\d+) errors?")
_VERUS = re.compile(r"verification results::\s*(\d+) verified,\s*(\d+) errors?")


@dataclasses.dataclass(frozen=True)
class ProgramReference:
    """A program to complete: the task text (hints removed / stubbed body) and how to assemble
    the file from an action."""
    task_program: str
    mode: str                   # "whole" (action = full program) or "vc-code" (action = body)
    language: str               # "dafny" or "verus"


def assemble_vericoding(template: str, code: str, helpers: str | None = None) -> str:
    """Puts the action into the ``<vc-code>`` (and optionally ``<vc-helpers>``) section."""
    def put(text, tag, body):
        pattern = re.compile(rf"(// <{tag}>\n).*?(\n?// </{tag}>)", re.S)
        if not pattern.search(text):
            raise ValueError(f"the task file has no <{tag}> section")
        return pattern.sub(lambda m: m.group(1) + body.strip("\n") + m.group(2), text, count=1)
    out = put(template, "vc-code", code)
    return put(out, "vc-helpers", helpers) if helpers is not None else out


class _VerifierEvaluator(Evaluator):
    suffix = ".dfy"
    forbidden = re.compile(r"\bassume\b|\{:verify\s+false\}")

    def __init__(self, command, timeout_s: float = 300):
        tools.require(command[0])  # fail at set-up, with install instructions, not per task
        self.command, self.timeout_s = tuple(command), timeout_s

    def program(self, ref: ProgramReference, action: str) -> str:
        if ref.mode == "vc-code":
            return assemble_vericoding(ref.task_program, action)
        return action

    def _check(self, task: Task, action: str) -> Outcome:
        ref: ProgramReference = task.reference
        if self.forbidden.search(action):
            return Outcome(0.0, False, True, "The action may not assume facts or switch off "
                           "verification.")
        try:
            program = self.program(ref, action)
        except ValueError as err:
            return Outcome(0.0, False, True, str(err))
        if ref.mode == "whole":
            missing = [l for l in _spec_lines(ref.task_program) if l not in _spec_lines(program)]
            if missing:
                return Outcome(0.0, False, True, f"The specification was changed: "
                               f"{truncate(missing[0], 200)} is missing.")
        with tempfile.TemporaryDirectory(prefix="countermem-verify-") as d:
            path = pathlib.Path(d) / f"task{self.suffix}"
            path.write_text(program, encoding="utf-8")
            # The file by its name in the working directory: the verifier's messages then name
            # no temporary directory, so feedback (prompts, a record's evidence) is the same on
            # every host and run.
            run = tools.run_tool([*self.command, path.name], d, self.timeout_s)
        if run.timed_out:
            return Outcome(0.0, False, False, f"{self.name} ran past {self.timeout_s:.0f}s.",
                           reason="timeout")
        return self.parse(run)

    def parse(self, run) -> Outcome:
        m = (_VERUS if self.suffix == ".rs" else _SUMMARY).search(run.output)
        errors_text = [l.strip() for l in run.output.splitlines()
                       if re.search(r"\berror\b", l, re.I) and not _SUMMARY.search(l)
                       and not _VERUS.search(l)]
        if not m:
            return Outcome(0.0, False, True, truncate("The program did not reach verification "
                           "(parse or resolution error): " + " | ".join(errors_text[:4]
                           or run.output.splitlines()[-3:]), 800), details={"verified": 0})
        verified, errors = int(m.group(1)), int(m.group(2))
        ok = errors == 0 and run.returncode == 0
        utility = 1.0 if ok else verified / max(verified + errors, 1)
        feedback = (f"Verified ({verified} verification conditions)." if ok else truncate(
            f"{verified} verified, {errors} errors: " + " | ".join(errors_text[:4]), 800))
        return Outcome(utility, ok, True, feedback, details={"verified": verified, "errors": errors})


class DafnyEvaluator(_VerifierEvaluator):
    """Dafny 4 (``dafny verify``), or Debian's Dafny 2.3 when ``legacy=True`` (labelled as such)."""

    def __init__(self, legacy: bool = False, timeout_s: float = 300, command=None):
        self.legacy = legacy
        self.name = "dafny-2.3-legacy" if legacy else "dafny4"
        self.version = "legacy-2.3" if legacy else "4"
        default = ("dafny", "/compile:0", "/nologo") if legacy else ("dafny", "verify")
        super().__init__(command or default, timeout_s)


class VerusEvaluator(_VerifierEvaluator):
    name = "verus"
    version = "1"
    suffix = ".rs"
    forbidden = re.compile(r"\bassume\s*\(|\badmit\s*\(|external_body")

    def __init__(self, command=("verus",), timeout_s: float = 300):
        super().__init__(command, timeout_s)
