"""Loaders for repository-repair benchmarks."""
import contextlib
import dataclasses
import difflib
import hashlib
import json
import logging
import os
import pathlib
import re

from evaluators.base import InputError, Task
from evaluators.coding import checker, sandbox, snapshot, verdict
from evaluators.coding import edits as edits_lib
from evaluators.grouping import digest

TIMEOUT_ARGS = ("--timeout=2",)  # per test; buggy programs may loop forever
QUIXBUGS_HIDDEN = ("correct_python_programs",)  # the reference fixes never enter the sandbox
_LOG = logging.getLogger(__name__)
ACTION_HELP = ("Answer with one localized edit:\nFILE: <path>\nLINES: <first>-<last>\nREPLACE:\n"
               "<the new lines>\n(or a unified diff).")


class DataError(InputError, ValueError):
    pass


def _numbered(text: str) -> str:
    return "\n".join(f"{i:>4} | {line}" for i, line in enumerate(text.splitlines(), 1))


def _cache_dir() -> pathlib.Path:
    base = os.environ.get("COUNTERMEM_CACHE", os.path.join(pathlib.Path.home(), ".cache",
                                                           "countermem"))
    return pathlib.Path(base) / "quixbugs"


def quixbugs_programs(root: pathlib.Path) -> list[str]:
    tests = root / "python_testcases"
    if not tests.is_dir():
        raise DataError(f"{tests}: QuixBugs python_testcases not found")
    names = []
    for f in sorted(tests.glob("test_*.py")):
        name = f.stem[len("test_"):]
        if (root / "python_programs" / f"{name}.py").exists() and \
                (root / "correct_python_programs" / f"{name}.py").exists():
            names.append(name)
    return names


def _cached(name: str, key_parts: list[bytes], compute):
    """``compute()``'s JSON result, cached under the QuixBugs cache folder by content hash (not
    when it is a refusal for a passing reason, e.g. a timeout on a busy machine)."""
    key = hashlib.sha256(b"\0".join(key_parts + [verdict.HARNESS_VERSION.encode()])).hexdigest()
    cache = _cache_dir() / f"{name}-{key[:16]}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    value = compute()
    if not str(value.get("refused", "")).startswith(TRANSIENT):
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(value))
    return value


TRANSIENT = ("running its tests timed out", "the test harness did not start")


def _collect_reason(v: verdict.Verdict, run: sandbox.Result) -> str:
    """Why a task's tests cannot serve as its checker ("" when they can)."""
    if run.timed_out:
        return TRANSIENT[0]
    if not v.started:
        return f"{TRANSIENT[1]}: {(run.stdout + run.stderr)[-300:]}"
    if v.collect_errors:
        nodeid, error = v.collect_errors[0]
        last = error.strip().splitlines()[-1] if error.strip() else ""
        return f"its tests cannot be collected ({nodeid}: {last[:200]})"
    problems = checker.run_problems(v, run, None)
    if v.missing:
        problems.append(f"{len(v.missing)} task tests are not collected (e.g. {v.missing[0]})")
    return "; ".join(problems)


def _split_tests(root: pathlib.Path, name: str, limits: sandbox.Limits) -> dict:
    """Runs the buggy program's tests once: {"f2p", "p2p"}, or {"refused": reason} when they
    cannot even be collected."""
    test_file = f"python_testcases/test_{name}.py"
    source = root / "python_programs" / f"{name}.py"

    def compute():
        ref = checker.RepoReference(str(root), (test_file,), (), (), (), TIMEOUT_ARGS,
                                    hidden=QUIXBUGS_HIDDEN)
        copy = snapshot.make_copy(root, hidden=QUIXBUGS_HIDDEN)
        try:
            v, run = checker.run_tests(copy, ref, limits)
        finally:
            snapshot.remove_copy(copy)
        reason = _collect_reason(v, run) or ("" if v.outcomes else "running its tests gave no "
                                             "results")
        if reason:
            return {"refused": reason}
        ran = {t: ok for t, ok in v.outcomes.items() if t not in v.skipped}  # skipped: neither
        return {"f2p": sorted(t for t, ok in ran.items() if not ok),
                "p2p": sorted(t for t, ok in ran.items() if ok)}
    return _cached(name, [source.read_bytes(), (root / test_file).read_bytes()], compute)


def _tree_stamp(root: pathlib.Path) -> bytes:
    """Path, size and modification time of every file (not .git): changes when the checkout does."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                digest.update(f"{dirpath}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.digest()


def check_collection(ref: checker.RepoReference, task_id: str,
                     limits: sandbox.Limits = sandbox.Limits(wall_s=120)) -> str:
    """Collects the task's tests once (setup patch applied, in the sandbox): "" when every
    FAIL_TO_PASS and PASS_TO_PASS id is collected without error, else the reason to refuse it."""
    def compute():
        copy = snapshot.make_copy(ref.repo_dir, hidden=ref.hidden)
        try:
            if ref.setup_patch:
                checker.RepoTestEvaluator().apply(copy, ref, ref.setup_patch, restrict=False)
            collect_ref = dataclasses.replace(ref, pytest_args=ref.pytest_args + ("--collect-only",))
            v, run = checker.run_tests(copy, collect_ref, limits,
                                       set(ref.fail_to_pass) | set(ref.pass_to_pass))
        except (edits_lib.EditError, ValueError, UnicodeDecodeError) as err:
            return {"refused": f"its setup patch does not apply: {err}"}
        finally:
            snapshot.remove_copy(copy)
        return {"refused": _collect_reason(v, run)}
    parts = [json.dumps(dataclasses.asdict(ref), sort_keys=True).encode(),
             _tree_stamp(pathlib.Path(ref.repo_dir))]
    return _cached("collect-" + re.sub(r"[^\w.-]", "_", task_id)[:80], parts, compute)["refused"]


def _keep_collectable(tasks: list[Task], check: bool) -> list[Task]:
    """Drops (with a logged reason) the tasks whose tests cannot be collected."""
    if not check:
        return tasks
    kept = []
    for task in tasks:
        reason = check_collection(task.reference, task.task_id)
        if reason:
            _LOG.warning("refused %s: %s", task.task_id, reason)
        else:
            kept.append(task)
    return kept


def known_fix_diff(root: pathlib.Path, name: str) -> str:
    """The QuixBugs fix as a unified diff against the buggy program."""
    rel = f"python_programs/{name}.py"
    buggy = (root / rel).read_text().splitlines(keepends=True)
    fixed = (root / "correct_python_programs" / f"{name}.py").read_text()
    fixed = fixed.replace("correct_python_programs", "python_programs").splitlines(keepends=True)
    return "".join(difflib.unified_diff(buggy, fixed, f"a/{rel}", f"b/{rel}"))


def load_quixbugs(root: str | pathlib.Path, names=None,
                  limits: sandbox.Limits = sandbox.Limits(wall_s=120)) -> list[Task]:
    root = pathlib.Path(root)
    tasks = []
    for name in names or quixbugs_programs(root):
        split = _split_tests(root, name, limits)
        if "refused" in split:
            _LOG.warning("refused quixbugs/%s: %s", name, split["refused"])
            continue
        f2p, p2p = split["f2p"], split["p2p"]
        if not f2p:
            continue  # the buggy program already passes every test we have: nothing to repair
        rel = f"python_programs/{name}.py"
        source = (root / rel).read_text()
        tasks.append(Task(
            task_id=f"quixbugs/{name}", domain="coding", benchmark="quixbugs",
            prompt=f"The function in {rel} has a bug: {len(f2p)} of its tests fail. "
                   f"Fix it with one localized edit.\n{ACTION_HELP}",
            context=f"{rel}:\n{_numbered(source)}\n\nFailing tests: "
                    + ", ".join(t.split('::', 1)[1] for t in f2p[:6]),
            decision_unit="localized edit", environment="quixbugs",
            reference=checker.RepoReference(str(root), (f"python_testcases/test_{name}.py",),
                                            tuple(f2p), tuple(p2p), (rel,), TIMEOUT_ARGS,
                                            hidden=QUIXBUGS_HIDDEN),
            features={"program": name, "file": rel}))
    return tasks


def _as_list(value) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


def load_swebench(instances_json: str | pathlib.Path, checkouts: str | pathlib.Path,
                  python: str = "/usr/bin/python3", check_tests: bool = True) -> list[Task]:
    """SWE-bench instances whose checkout exists at ``checkouts/<instance_id>``; with
    ``check_tests`` an instance whose tests cannot be collected is refused (logged with the
    reason)."""
    path = pathlib.Path(instances_json)
    try:
        instances = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: {err}") from None
    if isinstance(instances, dict):  # {"metadata": ..., "instances": [...]}
        instances = instances.get("instances")
    if not isinstance(instances, list):
        raise DataError(f"{path}: expected a list of instances (or {{'instances': [...]}})")
    tasks, missing = [], []
    for i, inst in enumerate(instances):
        for key in ("instance_id", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", "patch"):
            if key not in inst:
                raise DataError(f"{path}: instance {i}: missing field {key!r}")
        repo = pathlib.Path(checkouts) / inst["instance_id"]
        if not repo.is_dir():
            missing.append(inst["instance_id"])
            continue
        f2p, p2p = _as_list(inst["FAIL_TO_PASS"]), _as_list(inst["PASS_TO_PASS"])
        files = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", inst["patch"], re.M)))
        test_files = sorted({t.split("::")[0] for t in f2p + p2p if "::" in t})
        tasks.append(Task(
            task_id=f"swebench/{inst['instance_id']}", domain="coding", benchmark="swebench",
            prompt=f"{inst['problem_statement'][:2500]}\n{ACTION_HELP}",
            context=f"Repository {inst.get('repo', '')} at {inst.get('base_commit', '')[:12]}; "
                    f"files likely involved: {', '.join(files)}",
            decision_unit="edit / patch", environment=inst.get("repo", ""),
            reference=checker.RepoReference(str(repo), tuple(test_files), tuple(f2p), tuple(p2p),
                                            tuple(files), (), python, inst.get("test_patch", "")),
            features={"repo": inst.get("repo", ""), "version": str(inst.get("version", ""))}))
    if missing and not tasks:
        raise DataError(f"no SWE-bench checkout found under {checkouts} (expected one folder per "
                        f"instance id, e.g. {missing[0]}); see docs/data.md")
    return _keep_collectable(tasks, check_tests)


def parse_bug_info(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip().strip('"')
    return out


def load_bugsinpy(bugsinpy_root: str | pathlib.Path, checkouts: str | pathlib.Path,
                  python: str = "/usr/bin/python3", check_tests: bool = True) -> list[Task]:
    """BugsInPy bugs with a checkout at ``checkouts/<project>-<bug>``; with ``check_tests`` a bug
    whose tests cannot be collected is refused (logged with the reason)."""
    root = pathlib.Path(bugsinpy_root) / "projects"
    if not root.is_dir():
        raise DataError(f"{root}: BugsInPy projects folder not found")
    tasks = []
    for bug_dir in sorted(root.glob("*/bugs/*")):
        info_path = bug_dir / "bug.info"
        if not info_path.exists():
            continue
        info = parse_bug_info(info_path.read_text())
        project, bug = bug_dir.parts[-3], bug_dir.name
        repo = pathlib.Path(checkouts) / f"{project}-{bug}"
        if not repo.is_dir():
            continue
        patch = (bug_dir / "bug_patch.txt").read_text() if (bug_dir / "bug_patch.txt").exists() else ""
        files = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", patch, re.M)))
        run_test = (bug_dir / "run_test.sh").read_text() if (bug_dir / "run_test.sh").exists() else ""
        tests = re.findall(r"pytest\s+(\S+::\S+|\S+\.py)", run_test)
        test_files = tuple(sorted({t.split("::")[0] for t in tests} or
                                  {info.get("test_file", "")} - {""}))
        tasks.append(Task(
            task_id=f"bugsinpy/{project}/{bug}", domain="coding", benchmark="bugsinpy",
            prompt=f"A regression test of {project} fails (bug {bug}). Fix it.\n{ACTION_HELP}",
            context=f"Test command: {run_test.strip()[:500]}\nFiles: {', '.join(files)}",
            decision_unit="localized edit", environment=project,
            reference=checker.RepoReference(str(repo), test_files, tuple(tests), (), tuple(files),
                                            (), python),
            features={"project": project, "python_version": info.get("python_version", "")}))
    return _keep_collectable(tasks, check_tests)


def group_key(task: Task) -> str:
    """Same repository snapshot and the same editable files (and test patch): one instance."""
    ref = task.reference
    return digest(ref.repo_dir, *ref.editable, ref.setup_patch)
