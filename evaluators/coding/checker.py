"""Repository-test checker (paper Appendix D.1: SWE-bench Verified, BugsInPy; QuixBugs here)."""
import dataclasses
import json
import pathlib

from evaluators.base import Evaluator, Outcome, Task, truncate
from evaluators.coding import edits as edits_lib
from evaluators.coding import sandbox, snapshot, verdict as verdict_lib

HARNESS_DIR = pathlib.Path(__file__).resolve().parent / "harness"
EXPECTED = ".countermem-expected.json"   # written by the host into the copy (read-only inside)


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
    hidden: tuple[str, ...] = ()       # never copied into the sandbox (e.g. reference fixes)


def run_tests(copy: pathlib.Path, ref: RepoReference, limits: sandbox.Limits,
              expected: set[str] | None = None) -> tuple[verdict_lib.Verdict, sandbox.Result]:
    """Runs the reference's tests (only ``expected`` ids when given) in the sandbox; the verdict
    comes from the harness over the channel."""
    env = {"PYTHONPATH": "/harness"}
    if expected is not None:
        (copy / EXPECTED).write_text(json.dumps(sorted(expected)), encoding="utf-8")
        env["COUNTERMEM_EXPECTED"] = f"/work/{EXPECTED}"
    argv = [ref.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "countermem_harness",
            "--rootdir=/work", "--tb=short", *ref.pytest_args, *ref.test_files]
    result = sandbox.run(str(copy), argv, limits, env=env,
                         ro_mounts=((str(HARNESS_DIR), "/harness"),), channel=True)
    return verdict_lib.parse(result.channel, result.key), result


def run_problems(verdict: verdict_lib.Verdict, run: sandbox.Result,
                 expected: set[str] | None) -> list[str]:
    """Everything that makes a started run's verdict unusable."""
    problems = list(verdict.problems)
    if run.channel_overflow:
        problems.append("the verdict channel went past its size cap")
    if verdict.finished and run.returncode != verdict.exitstatus:
        problems.append(f"the process exited with {run.returncode}, but pytest's session ended "
                        f"with {verdict.exitstatus}")
    if verdict.finished and verdict.exitstatus not in (0, 1):
        problems.append(f"pytest ended with exit status {verdict.exitstatus} (interrupted, "
                        "internal error, usage error or no tests)")
    if expected is not None:
        problems += verdict_lib.coverage_problems(verdict, expected)
    return problems


class RepoTestEvaluator(Evaluator):
    name = "pytest-bwrap"
    version = f"2+harness{verdict_lib.HARNESS_VERSION}"

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
        copy = snapshot.make_copy(ref.repo_dir, self.scratch, hidden=ref.hidden)
        expected = set(ref.fail_to_pass) | set(ref.pass_to_pass)
        try:
            if ref.setup_patch:
                self.apply(copy, ref, ref.setup_patch, restrict=False)
            try:
                changed = self.apply(copy, ref, action)
            except (edits_lib.EditError, ValueError, UnicodeDecodeError) as err:
                return Outcome(0.0, False, True, f"Edit not applied: {err}")
            verdict, run = run_tests(copy, ref, self.limits, expected)
        except sandbox.SandboxUnavailable as err:
            return Outcome(0.0, False, False, f"The sandbox could not start: {err}",
                           reason="sandbox unavailable")
        finally:
            snapshot.remove_copy(copy)
        if run.timed_out:
            return Outcome(0.0, False, False, f"Tests ran past the {self.limits.wall_s:.0f}s limit "
                           "and were killed.", reason="timeout")
        if run.output_overflow:
            return Outcome(0.0, False, True, f"The tests printed more than "
                           f"{self.limits.read_bytes >> 20} MB and were stopped.",
                           details={"problems": ["output flood"]})
        if not verdict.started:
            tail = truncate((run.stdout + run.stderr)[-600:], 600)
            return Outcome(0.0, False, False, f"The test harness did not start: {tail}",
                           reason="sandbox: harness did not start")
        problems = run_problems(verdict, run, expected)
        if problems:
            errors = "; ".join(f"{n}: {e.strip().splitlines()[-1] if e.strip() else ''}"
                               for n, e in verdict.collect_errors[:2])
            feedback = (f"Tests could not be collected ({errors}). " if errors else "") + \
                "No valid test verdict: " + "; ".join(problems[:3]) + "."
            return Outcome(0.0, False, True, feedback,
                           details={"changed": changed, "problems": problems,
                                    "sandbox_s": run.wall_time})
        outcomes = verdict.outcomes
        f2p = list(ref.fail_to_pass)
        passed = [t for t in f2p if outcomes.get(t)]
        broken = [t for t in ref.pass_to_pass if not outcomes.get(t)]
        utility = 0.0 if broken else len(passed) / max(len(f2p), 1)
        ok = utility == 1.0 and verdict.exitstatus == 0
        failing = [t.split("::", 1)[-1] for t in f2p if not outcomes.get(t)]
        feedback = (f"All {len(f2p)} target tests pass." if ok else
                    f"{len(passed)}/{len(f2p)} target tests pass"
                    + (f"; failing: {truncate(', '.join(failing[:8]), 300)}" if failing else "")
                    + (f"; broke {len(broken)} previously passing tests: "
                       f"{truncate(', '.join(b.split('::', 1)[-1] for b in broken[:5]), 200)}"
                       if broken else "") + ".")
        if utility == 1.0 and not ok:
            utility, feedback = 0.0, (f"Every task test passed, but pytest exited with "
                                      f"{verdict.exitstatus}.")
        return Outcome(utility, ok, True, feedback,
                       details={"changed": changed, "passed": len(passed), "f2p": len(f2p),
                                "broken": len(broken), "sandbox_s": run.wall_time})
