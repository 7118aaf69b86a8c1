"""Issue #11: checkers that cannot be forged, leaked from, hung, flooded or starved.

The catalogue of hostile actions lives in ``benchmarks.security.hostile`` (the
report ``python -m benchmarks.security.hostile`` runs the same cases); each case is one
test here.
"""
import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import pathlib
import re
import shutil
import tempfile
import time

import pytest

from benchmarks.security import hostile
from evaluators.coding import sandbox, verdict
from evaluators.coding.checker import RepoTestEvaluator
from evaluators.coding.loaders import known_fix_diff

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture(scope="module")
def fx(benchdata):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    fixture = hostile.Fixture(benchdata)
    yield fixture
    fixture.close()


@pytest.mark.parametrize("name", list(hostile.CASES))
def test_hostile_case_is_refused_bounded_and_contained(fx, name):
    result = hostile.run_case(fx, name)
    assert result.failures == [], result.line()


# --- the verdict channel ---------------------------------------------------------------------
KEY = b"k" * 32


def _records(*records, key=KEY) -> bytes:
    out, mac = b"", b""
    for seq, record in enumerate(records):
        body = json.dumps({"seq": seq, **record}, sort_keys=True).encode()
        mac = hmac.new(key, mac + body, hashlib.sha256).digest()
        out += mac.hex().encode() + b" " + body + b"\n"
    return out


GOOD = [{"kind": "start"}, {"kind": "collected", "ids": ["t.py::a"], "missing": []},
        {"kind": "test", "nodeid": "t.py::a", "passed": True},
        {"kind": "finish", "exitstatus": 0, "calls": 1, "tampered": []}]


def test_a_complete_authentic_verdict_is_accepted():
    v = verdict.parse(_records(*GOOD), KEY)
    assert v.problems == [] and v.outcomes == {"t.py::a": True} and v.exitstatus == 0
    assert verdict.coverage_problems(v, {"t.py::a"}) == []


@pytest.mark.parametrize("data,problem", [
    (_records(*GOOD, key=b"x" * 32), "not written by the harness"),          # no key
    (_records(*GOOD) + _records(*GOOD)[-200:], "not written"),                # garbage appended
    (_records(*GOOD) + b"abc", "partial record"),
    (_records(*GOOD) + b"0" * 64 + b' {"seq": 4, "kind": "test"}\n', "not written"),
    (_records(*GOOD[:3]), "did not finish"),                                  # exited early
    (_records(*GOOD[:3], GOOD[2], GOOD[3]), "second or uncollected"),         # duplicate result
    (_records(*GOOD[:3], {**GOOD[3], "tampered": ["x was replaced"]}), "tampered"),
    (_records(*GOOD[:3], {**GOOD[3], "calls": 5}), "more test calls"),
], ids=["wrong-key", "garbage-appended", "partial", "unsigned-record", "no-finish", "duplicate",
        "tampered", "uncounted-calls"])
def test_forged_partial_or_tampered_verdicts_are_refused(data, problem):
    assert any(problem in p for p in verdict.parse(data, KEY).problems)


def test_records_after_the_finish_are_refused():
    data = _records(*GOOD, {"kind": "test", "nodeid": "t.py::a", "passed": True})
    assert any("after the end" in p for p in verdict.parse(data, KEY).problems)


def test_verdict_for_another_test_set_is_refused():
    v = verdict.parse(_records(*GOOD), KEY)
    assert "no result for 1 of the 2" in verdict.coverage_problems(v, {"t.py::a", "t.py::b"})[0]
    assert "outside the task" in verdict.coverage_problems(v, set())[0]


# --- the sandbox itself ----------------------------------------------------------------------
@pytest.fixture
def readable_dir():
    """A folder the sandbox uids can reach (pytest's tmp_path sits under a 0700 folder)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="countermem-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def _hwm_mb() -> float:
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) / 1024


@needs_bwrap
def test_no_host_variable_is_readable_inside(tmp_path, monkeypatch):
    monkeypatch.setenv("COUNTERMEM_CANARY_SECRET", "canary-1234")
    script = ("for f in /proc/*/environ; do cat $f 2>/dev/null; done; echo; env; "
              "cat /proc/1/environ /proc/self/environ")
    result = sandbox.run(str(tmp_path), ["/bin/sh", "-c", script])
    assert result.returncode == 0 and "PATH=" in result.stdout
    assert "canary-1234" not in result.stdout + result.stderr
    assert "COUNTERMEM_CANARY_SECRET" not in result.stdout


@needs_bwrap
def test_a_256mb_stdout_flood_costs_the_host_bounded_memory(tmp_path):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _hwm_mb()
    result = sandbox.run(str(tmp_path), ["/bin/sh", "-c", "head -c 268435456 /dev/zero"],
                         sandbox.Limits(wall_s=30))
    assert result.output_overflow and len(result.stdout) <= sandbox.Limits().keep_bytes
    assert _hwm_mb() - before < 64


@needs_bwrap
@pytest.mark.parametrize("folder", ["/tmp", "/work", "/dev/shm"])
def test_filling_a_writable_folder_stops_at_its_size_limit(tmp_path, folder):
    free_before = shutil.disk_usage("/tmp").free
    limits = sandbox.Limits(wall_s=30, tmp_bytes=32 << 20, work_bytes=32 << 20)
    result = sandbox.run(str(tmp_path), ["/bin/sh", "-c",
                                         f"i=0; while head -c 8388608 /dev/zero > {folder}/f$i; "
                                         "do i=$((i+1)); done; echo $i; du -sm " + folder],
                         limits)
    assert not result.timed_out and "No space left" in result.stderr
    assert int(result.stdout.split()[0]) <= 4
    assert shutil.disk_usage("/tmp").free > free_before - (16 << 20)
    assert list(tmp_path.iterdir()) == []


@needs_bwrap
def test_the_repository_and_root_are_read_only_inside(readable_dir):
    tmp_path = readable_dir
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test(): pass\n")
    (tmp_path / "conftest.py").write_text("")
    script = ("for p in tests/test_x.py tests/new.py conftest.py /usr/x /x /harness; do "
              "(echo pwned > $p) 2>/dev/null && echo WROTE $p; done; echo scratch > new.txt && "
              "cat new.txt")
    result = sandbox.run(str(tmp_path), ["/bin/sh", "-c", script])
    assert "WROTE" not in result.stdout and "scratch" in result.stdout
    assert (tmp_path / "tests" / "test_x.py").read_text() == "def test(): pass\n"
    assert not (tmp_path / "new.txt").exists()


# --- checks that could not start --------------------------------------------------------------
@needs_bwrap
def test_a_check_without_a_free_slot_is_not_completed(fx, monkeypatch):
    monkeypatch.setattr(sandbox, "SLOTS", 1)
    evaluator = RepoTestEvaluator(sandbox.Limits(wall_s=1.0))
    with sandbox.slot(deadline=time.monotonic() + 5):  # this test holds the only slot
        outcome = evaluator.evaluate(evaluator.reset(fx.gcd), known_fix_diff(fx.repo, "gcd"))
    assert not outcome.completed and not outcome.failed_attempt
    assert "slots are busy" in outcome.feedback


@needs_bwrap
@pytest.mark.parametrize("python", ["/usr/bin/no-such-python", "/usr/bin/true"])
def test_a_harness_that_cannot_start_is_not_a_failed_attempt(fx, python):
    task = dataclasses.replace(fx.gcd, reference=dataclasses.replace(fx.gcd.reference,
                                                                     python=python))
    evaluator = RepoTestEvaluator()
    outcome = evaluator.evaluate(evaluator.reset(task), known_fix_diff(fx.repo, "gcd"))
    assert not outcome.completed and not outcome.failed_attempt
    assert re.search("could not start|did not start", outcome.feedback)


@needs_bwrap
def test_the_reference_fix_is_not_in_the_sandbox_but_the_known_fix_still_passes(fx):
    assert "correct_python_programs" in fx.gcd.reference.hidden
    evaluator = RepoTestEvaluator()
    assert evaluator.evaluate(evaluator.reset(fx.gcd), known_fix_diff(fx.repo, "gcd")).success


@needs_bwrap
def test_concurrent_slots_use_distinct_uids(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("per-slot uids need root to switch users")
    with contextlib.ExitStack() as stack:
        uids = [stack.enter_context(sandbox.slot(time.monotonic() + 5)) for _ in range(3)]
    assert len(set(uids)) == 3 and all(u >= sandbox.SLOT_UID_BASE for u in uids)
