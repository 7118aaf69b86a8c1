"""Sandboxed repository tests on QuixBugs: known fixes score 1, hostile patches are contained."""
import hashlib
import pathlib
import shutil
import socket
import threading
import time

import pytest

from evaluators.coding import sandbox
from evaluators.coding.checker import RepoTestEvaluator
from evaluators.coding.loaders import known_fix_diff, load_quixbugs

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

PROGRAMS = ["gcd", "kth", "sieve", "lis", "quicksort", "flatten", "pascal", "to_base"]


def _tree_hash(root: pathlib.Path) -> str:
    digest = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            digest.update(str(p.relative_to(root)).encode())
            digest.update(p.read_bytes())
    return digest.hexdigest()


def _sandbox_processes(wait_s: float = 3.0) -> list[int]:
    """Live (non-zombie) processes of any sandbox slot uid, after giving stragglers a moment."""
    deadline = time.time() + wait_s
    while True:
        live = sandbox.processes_of(sandbox.sandbox_uids())
        if not live or time.time() > deadline:
            return live
        time.sleep(0.1)


@pytest.fixture(scope="module")
def quixbugs(benchdata, tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo") / "quixbugs"
    shutil.copytree(benchdata / "quixbugs", repo)
    for p in repo.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    names = [n for n in PROGRAMS if (repo / "python_programs" / f"{n}.py").exists()]
    return repo, {t.features["program"]: t for t in load_quixbugs(repo, names)}


def test_known_fixes_score_one_and_buggy_programs_less(quixbugs):
    repo, tasks = quixbugs
    assert len(tasks) >= 5
    evaluator = RepoTestEvaluator()
    for name, task in tasks.items():
        fixed = evaluator.evaluate(evaluator.reset(task), known_fix_diff(repo, name))
        assert fixed.success and fixed.utility == 1.0, (name, fixed.feedback)
        first = (repo / "python_programs" / f"{name}.py").read_text().splitlines()[0]
        unchanged = evaluator.evaluate(evaluator.reset(task),
                                       f"FILE: python_programs/{name}.py\nLINES: 1-1\nREPLACE:\n{first}")
        assert unchanged.completed and unchanged.utility < 1.0


def test_localized_edit_fixes_gcd(quixbugs):
    repo, tasks = quixbugs
    source = (repo / "python_programs" / "gcd.py").read_text().splitlines()
    line = next(i for i, l in enumerate(source, 1) if "gcd(a % b, b)" in l)
    action = f"FILE: python_programs/gcd.py\nLINES: {line}-{line}\nREPLACE:\n```python\n" \
             f"        return gcd(b, a % b)\n```"
    outcome = RepoTestEvaluator().evaluate(RepoTestEvaluator().reset(tasks["gcd"]), action)
    assert outcome.success, outcome.feedback


def test_edit_outside_the_editable_files_is_refused(quixbugs):
    _, tasks = quixbugs
    outcome = RepoTestEvaluator().evaluate(
        RepoTestEvaluator().reset(tasks["gcd"]),
        "FILE: python_testcases/test_gcd.py\nLINES: 1-1\nREPLACE:\nimport pytest")
    assert outcome.completed and not outcome.success and "not an editable file" in outcome.feedback
    outcome = RepoTestEvaluator().evaluate(
        RepoTestEvaluator().reset(tasks["gcd"]), "FILE: ../../etc/passwd\nLINES: 1-1\nREPLACE:\nx")
    assert not outcome.success


def _hostile(task, code: str, wall_s: float = 8.0):
    n = len((pathlib.Path(task.reference.repo_dir) / "python_programs" / "gcd.py").read_text()
            .splitlines())
    action = f"FILE: python_programs/gcd.py\nLINES: 1-{n}\nREPLACE:\n{code}"
    evaluator = RepoTestEvaluator(sandbox.Limits(wall_s=wall_s, cpu_s=10, memory_bytes=1 << 30,
                                                 processes=64))
    return evaluator.evaluate(evaluator.reset(task), action)


CORRECT_GCD = "def gcd(a, b):\n    return a if b == 0 else gcd(b, a % b)\n"


@pytest.mark.parametrize("kind", ["infinite_loop", "fork_bomb", "memory_hog", "write_outside"])
def test_hostile_patch_is_contained(quixbugs, kind, tmp_path):
    repo, tasks = quixbugs
    before = _tree_hash(repo)
    victim = repo / "python_programs" / "gcd.py"
    code = {
        "infinite_loop": "while True:\n    pass\n",
        "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        "memory_hog": "blob = bytearray(8 << 30)\n" + CORRECT_GCD,
        "write_outside": f"for p in [{str(victim)!r}, '/usr/evil', '/etc/evil', {str(tmp_path / 'evil')!r}]:\n"
                         "    try:\n        open(p, 'w').write('pwned')\n    except OSError:\n        pass\n"
                         "raise SystemExit('could not write outside')\n",
    }[kind]
    outcome = _hostile(tasks["gcd"], code)
    assert not outcome.success
    if kind in ("infinite_loop", "fork_bomb"):
        assert not outcome.completed and outcome.reason == "timeout"
        assert outcome.wall_time < 20
    assert _tree_hash(repo) == before
    assert not (tmp_path / "evil").exists()
    assert _sandbox_processes() == []


def test_reading_a_file_outside_the_copy_fails(quixbugs, tmp_path):
    _, tasks = quixbugs
    secret = tmp_path / "secret.txt"
    secret.write_text("42")
    secret.chmod(0o644)
    code = f"if open({str(secret)!r}).read() == '42':\n" + "".join(
        "    " + line + "\n" for line in CORRECT_GCD.splitlines())
    outcome = _hostile(tasks["gcd"], code)
    assert outcome.completed and outcome.utility == 0.0


def test_no_network_even_to_a_local_listener(quixbugs):
    _, tasks = quixbugs
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    received, finished = [], threading.Event()

    def accept():
        while not finished.is_set():
            try:
                conn, _ = server.accept()
                received.append(conn.recv(100))
                conn.close()
            except socket.timeout:
                continue
    listener = threading.Thread(target=accept)
    listener.start()
    code = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "s.sendall(b'pwned')\n" + CORRECT_GCD)
    try:
        outcome = _hostile(tasks["gcd"], code)
    finally:
        finished.set()
        listener.join()
        server.close()
    assert received == [] and outcome.utility == 0.0
    assert _sandbox_processes() == []
