"""SWE-bench and BugsInPy loaders, and the setup-patch path, on small repositories made here."""
import json
import shutil
import textwrap

import pytest

from evaluators.coding.checker import RepoTestEvaluator
from evaluators.coding.loaders import DataError, load_bugsinpy, load_quixbugs, load_swebench

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

SRC = "def add(a, b):\n    return a - b\n"
FIX = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n"
       "+    return a + b\n")
TEST_PATCH = ("--- /dev/null\n+++ b/tests/test_calc.py\n@@ -0,0 +1,7 @@\n+from calc import add\n+\n"
              "+def test_add():\n+    assert add(2, 3) == 5\n+\n+def test_zero():\n"
              "+    assert add(0, 0) == 0\n")


def test_swebench_loader_reads_the_shared_subset(benchdata, tmp_path):
    path = benchdata / "swebench_verified" / "swe_verified_15min1h_2files_instances.json"
    instances = json.loads(path.read_text())["instances"]
    for inst in instances[:2]:
        (tmp_path / inst["instance_id"]).mkdir()
    tasks = load_swebench(path, tmp_path, check_tests=False)
    assert [t.task_id for t in tasks] == [f"swebench/{i['instance_id']}" for i in instances[:2]]
    ref = tasks[0].reference
    assert ref.fail_to_pass == tuple(json.loads(instances[0]["FAIL_TO_PASS"]))
    assert ref.setup_patch == instances[0]["test_patch"] and len(ref.editable) == 2
    with pytest.raises(DataError, match="no SWE-bench checkout"):
        load_swebench(path, tmp_path / "none")


def _demo_instance(tmp_path, name, test_source, helper=None):
    """A SWE-bench-style instance whose test file (added by its test patch) is ``test_source``."""
    repo = tmp_path / "checkouts" / name
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text(SRC)
    if helper:
        (repo / "tests").mkdir()
        (repo / "tests" / "helper.py").write_text(helper)
    lines = test_source.splitlines()
    patch = (f"--- /dev/null\n+++ b/tests/test_calc.py\n@@ -0,0 +1,{len(lines)} @@\n"
             + "".join(f"+{line}\n" for line in lines))
    return {"instance_id": name, "repo": "demo/calc", "base_commit": "0" * 40,
            "problem_statement": "add subtracts", "patch": FIX, "test_patch": patch,
            "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]), "PASS_TO_PASS": "[]"}


def test_tasks_whose_tests_cannot_be_collected_are_refused_with_the_reason(tmp_path, caplog,
                                                                            monkeypatch):
    monkeypatch.setenv("COUNTERMEM_CACHE", str(tmp_path / "cache"))
    good = "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    instances = [
        _demo_instance(tmp_path, "demo__ok-1", "from tests.helper import two\n" + good,
                       helper="two = 2\n"),
        _demo_instance(tmp_path, "demo__missing_helper-1", "from tests.helper import two\n" + good),
        _demo_instance(tmp_path, "demo__syntax-1", good + "def broken(:\n"),
        _demo_instance(tmp_path, "demo__wrong_id-1", good.replace("test_add", "test_plus")),
    ]
    (tmp_path / "instances.json").write_text(json.dumps(instances))
    with caplog.at_level("WARNING"):
        tasks = load_swebench(tmp_path / "instances.json", tmp_path / "checkouts")
    assert [t.task_id for t in tasks] == ["swebench/demo__ok-1"]
    log = caplog.text
    assert "refused swebench/demo__missing_helper-1: its tests cannot be collected" in log
    assert "ModuleNotFoundError" in log or "ImportError" in log
    assert "refused swebench/demo__syntax-1" in log and "SyntaxError" in log
    assert "refused swebench/demo__wrong_id-1" in log and "not collected" in log
    evaluator = RepoTestEvaluator()
    assert evaluator.evaluate(evaluator.reset(tasks[0]), FIX).success


def test_quixbugs_program_with_an_uncollectable_test_is_refused(benchdata, tmp_path, caplog,
                                                                monkeypatch):
    monkeypatch.setenv("COUNTERMEM_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "quixbugs"
    shutil.copytree(benchdata / "quixbugs", repo)
    for p in repo.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    with open(repo / "python_testcases" / "test_gcd.py", "a") as f:
        f.write("\nimport helper_that_does_not_exist\n")
    with caplog.at_level("WARNING"):
        tasks = load_quixbugs(repo, ["gcd", "kth"])
    assert [t.task_id for t in tasks] == ["quixbugs/kth"]
    assert "refused quixbugs/gcd: its tests cannot be collected" in caplog.text


def test_swebench_style_task_applies_its_test_patch_then_the_fix(tmp_path):
    repo = tmp_path / "checkouts" / "demo__calc-1"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text(SRC)
    instances = [{"instance_id": "demo__calc-1", "repo": "demo/calc", "base_commit": "0" * 40,
                  "problem_statement": "add subtracts", "patch": FIX, "test_patch": TEST_PATCH,
                  "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
                  "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_zero"])}]
    (tmp_path / "instances.json").write_text(json.dumps({"instances": instances}))
    task = load_swebench(tmp_path / "instances.json", tmp_path / "checkouts")[0]
    evaluator = RepoTestEvaluator()
    assert evaluator.evaluate(evaluator.reset(task), FIX).success
    unchanged = evaluator.evaluate(evaluator.reset(task),
                                   "FILE: calc.py\nLINES: 1-1\nREPLACE:\ndef add(a, b):")
    assert unchanged.completed and unchanged.utility == 0.0
    assert not (repo / "tests").exists()  # the checkout itself is never touched


def test_bugsinpy_loader_and_fix(tmp_path):
    bug = tmp_path / "BugsInPy" / "projects" / "demo" / "bugs" / "1"
    bug.mkdir(parents=True)
    (bug / "bug.info").write_text('python_version="3.11"\nbuggy_commit_id="abc"\n'
                                  'fixed_commit_id="def"\ntest_file="tests/test_calc.py"\n')
    (bug / "bug_patch.txt").write_text(FIX)
    (bug / "run_test.sh").write_text("python -m pytest tests/test_calc.py::test_add\n")
    checkout = tmp_path / "checkouts" / "demo-1"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "calc.py").write_text(SRC)
    (checkout / "tests" / "test_calc.py").write_text(textwrap.dedent("""\
        from calc import add

        def test_add():
            assert add(2, 3) == 5
    """))
    tasks = load_bugsinpy(tmp_path / "BugsInPy", tmp_path / "checkouts")
    assert [t.task_id for t in tasks] == ["bugsinpy/demo/1"]
    assert tasks[0].reference.fail_to_pass == ("tests/test_calc.py::test_add",)
    evaluator = RepoTestEvaluator()
    assert evaluator.evaluate(evaluator.reset(tasks[0]), FIX).success


def test_quixbugs_split_leaves_out_tests_skipped_at_run_time(tmp_path, monkeypatch):
    """A test that skips itself (QuixBugs' slow knapsack and levenshtein cases) is neither
    FAIL_TO_PASS nor PASS_TO_PASS: no edit could make it pass."""
    monkeypatch.setenv("COUNTERMEM_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "quixbugs"
    for folder, body in [("python_programs", "def inc(x):\n    return x\n"),
                         ("correct_python_programs", "def inc(x):\n    return x + 1\n")]:
        (root / folder).mkdir(parents=True)
        (root / folder / "inc.py").write_text(body)
    (root / "python_testcases").mkdir()
    (root / "python_testcases" / "test_inc.py").write_text(textwrap.dedent("""\
        import pytest
        from python_programs.inc import inc

        def test_one():
            assert inc(1) == 2

        def test_zero_type():
            assert isinstance(inc(0), int)

        def test_slow():
            pytest.skip("takes minutes")
    """))
    task = load_quixbugs(root, ["inc"])[0]
    assert task.reference.fail_to_pass == ("python_testcases/test_inc.py::test_one",)
    assert task.reference.pass_to_pass == ("python_testcases/test_inc.py::test_zero_type",)
    evaluator = RepoTestEvaluator()
    fix = "FILE: python_programs/inc.py\nLINES: 2-2\nREPLACE:\n    return x + 1"
    assert evaluator.evaluate(evaluator.reset(task), fix).success
