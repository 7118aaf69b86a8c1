"""Sandbox overhead of the repository-test checker: a full evaluation (hard-linked copy, edit,
bubblewrap + unprivileged user + rlimits, JUnit parsing, clean-up) minus a bare pytest run of the
same tests on a plain copy, on a QuixBugs program. Used by ``benchmarks.speed.evaluators``."""
import shutil
import subprocess
import tempfile

from benchmarks.common import median_time
from countermem_jax.runtime.paths import data_root


def measure(repeats: int = 5, program: str = "gcd") -> dict:
    """Median sandbox overhead (ms) of ``RepoTestEvaluator`` over a bare pytest run of ``program``.

    Returns {} when bubblewrap is not installed (the sandboxed checker cannot run at all then).
    Both sides run the known fix, so they execute the same passing tests and differ only by
    the checker's isolation and bookkeeping. Needs the QuixBugs data under the data root.
    """
    if shutil.which("bwrap") is None:
        return {}
    from evaluators.coding.checker import RepoTestEvaluator
    from evaluators.coding.loaders import TIMEOUT_ARGS, known_fix_diff, load_quixbugs
    root = data_root() / "quixbugs"
    task = load_quixbugs(root, [program])[0]
    action = known_fix_diff(root, program)
    evaluator = RepoTestEvaluator()
    plain = tempfile.mkdtemp(prefix="countermem-bare-")
    shutil.copytree(root, plain, dirs_exist_ok=True)
    shutil.copy(root / "correct_python_programs" / f"{program}.py",
                f"{plain}/python_programs/{program}.py")
    bare_cmd = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", *TIMEOUT_ARGS,
                *task.reference.test_files]

    checked = median_time(lambda: evaluator.evaluate(evaluator.reset(task), action), repeats)
    bare = median_time(lambda: subprocess.run(bare_cmd, cwd=plain, capture_output=True,
                                              check=False), repeats)
    shutil.rmtree(plain, ignore_errors=True)
    return {"repo_sandbox_overhead_ms": (checked - bare) * 1e3, "repo_sandbox_bare_ms": bare * 1e3}


if __name__ == "__main__":
    from benchmarks.common import print_result
    result = measure()
    print(f"sandboxed pytest overhead {result['repo_sandbox_overhead_ms']:.1f} ms beyond a bare run "
          f"of {result['repo_sandbox_bare_ms']:.1f} ms (goal ≤ 150 ms)")
    print_result(result)
