"""Repository-test checker (paper Appendix D.1: SWE-bench Verified, BugsInPy; QuixBugs here).

Each evaluation makes a fresh hard-linked copy of the snapshot, applies the edit to the copy,
runs the task's tests with pytest inside the sandbox, and deletes the copy. U = fraction of
FAIL_TO_PASS tests that pass, and 0 if any PASS_TO_PASS test breaks (U = 1 is SWE-bench's
"resolved"). The original repository is never written.
"""
import dataclasses
import pathlib
import xml.etree.ElementTree as ET

from evaluators.base import Evaluator, Outcome, Task, truncate
from evaluators.coding import edits as edits_lib
from evaluators.coding import sandbox, snapshot

REPORT = ".countermem-junit.xml"


@dataclasses.dataclass(frozen=True)
class RepoReference:
    repo_dir: str
    test_files: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    editable: tuple[str, ...]          # files an edit may touch
    pytest_args: tuple[str, ...] = ()
    python: str = "/usr/bin/python3"
    setup_patch: str = ""              # applied before the action (SWE-bench's test_patch)


def run_tests(copy: pathlib.Path, ref: RepoReference, limits: sandbox.Limits) -> tuple[dict, sandbox.Result]:
    """{test id: passed?} for the reference's test files, run in the sandbox."""
    argv = [ref.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={REPORT}",
            *ref.pytest_args, *ref.test_files]
    result = sandbox.run(str(copy), argv, limits)
    outcomes = {}
    report = copy / REPORT
    if report.exists():
        try:
            for case in ET.parse(report).getroot().iter("testcase"):
                classname, name = case.get("classname", ""), case.get("name", "")
                path = classname.replace(".", "/") + ".py"
                test_id = f"{path}::{name}"
                failed = any(child.tag in ("failure", "error") for child in case)
                skipped = any(child.tag == "skipped" for child in case)
                if not skipped:
                    outcomes[test_id] = not failed
        except ET.ParseError:
            pass
    return outcomes, result


class RepoTestEvaluator(Evaluator):
    name = "pytest-bwrap"
    version = "1"

    def __init__(self, limits: sandbox.Limits = sandbox.Limits(wall_s=60), scratch: str | None = None):
        self.limits = limits
        self.scratch = scratch

    def apply(self, copy: pathlib.Path, ref: RepoReference, action: str,
              restrict: bool = True) -> list[str]:
        """Applies the action to the copy; returns the files it changed. With ``restrict`` only
        the task's editable files may change (the task's own setup patch is not restricted)."""
        localized = edits_lib.parse_localized(action)
        patches = ([edits_lib.FilePatch(localized.path, ())] if localized else
                   edits_lib.parse_unified_diff(action))
        changed = []
        for patch in patches:
            if restrict and patch.path not in ref.editable:
                raise edits_lib.EditError(f"{patch.path} is not an editable file of this task "
                                          f"(editable: {', '.join(ref.editable)})")
            target = snapshot.safe_path(copy, patch.path)
            if patch.new_file and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                text = ""
            else:
                text = target.read_text(encoding="utf-8")
            new = localized.apply(text) if localized else edits_lib.apply_hunks(text, patch)
            snapshot.replace_file(copy, patch.path, new)
            changed.append(patch.path)
        return changed

    def _check(self, task: Task, action: str) -> Outcome:
        ref: RepoReference = task.reference
        copy = snapshot.make_copy(ref.repo_dir, self.scratch)
        try:
            if ref.setup_patch:
                self.apply(copy, ref, ref.setup_patch, restrict=False)
            try:
                changed = self.apply(copy, ref, action)
            except (edits_lib.EditError, ValueError, UnicodeDecodeError) as err:
                return Outcome(0.0, False, True, f"Edit not applied: {err}")
            outcomes, run = run_tests(copy, ref, self.limits)
        finally:
            snapshot.remove_copy(copy)
        if run.timed_out:
            return Outcome(0.0, False, False, f"Tests ran past the {self.limits.wall_s:.0f}s limit "
                           "and were killed.", reason="timeout")
        f2p = [t for t in ref.fail_to_pass]
        passed = [t for t in f2p if outcomes.get(t)]
        broken = [t for t in ref.pass_to_pass if not outcomes.get(t)]
        if not outcomes:
            tail = truncate((run.stdout + run.stderr)[-600:], 600)
            return Outcome(0.0, False, True, f"No test result (collection failed?): {tail}",
                           details={"returncode": run.returncode})
        utility = 0.0 if broken else len(passed) / max(len(f2p), 1)
        ok = utility == 1.0
        failing = [t.split("::", 1)[-1] for t in f2p if not outcomes.get(t)]
        feedback = (f"All {len(f2p)} target tests pass." if ok else
                    f"{len(passed)}/{len(f2p)} target tests pass"
                    + (f"; failing: {truncate(', '.join(failing[:8]), 300)}" if failing else "")
                    + (f"; broke {len(broken)} previously passing tests: "
                       f"{truncate(', '.join(b.split('::', 1)[-1] for b in broken[:5]), 200)}"
                       if broken else "") + ".")
        return Outcome(utility, ok, True, feedback,
                       details={"changed": changed, "passed": len(passed), "f2p": len(f2p),
                                "broken": len(broken), "sandbox_s": run.wall_time})
