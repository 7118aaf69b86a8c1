"""The decision log's writer: no fsync per event, a barrier before what must not be ahead of
the log, resumable after a kill -9 of the writing process."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from countermem_jax.runtime import runlog
from countermem_jax.runtime.runlog import EventBuffer, RunLog

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WRITER = textwrap.dedent("""
    import sys, time
    from countermem_jax.runtime.runlog import RunLog
    log = RunLog(sys.argv[1])
    for t in range(4):
        for d in range(5):
            log.write("decision", run="r", phase="evaluation", task_id=f"t{t}", decision=d,
                      q=[0.1] * 50)
        if t < 3:
            log.write("task_end", run="r", phase="evaluation", task_id=f"t{t}", success=True)
    print("ready", flush=True)
    time.sleep(120)
""")


def test_kill_9_mid_task_keeps_every_finished_task(tmp_path):
    path = tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE,
                            text=True, env=os.environ | {"PYTHONPATH": _ROOT})
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.kill()
        proc.wait(10)
    log = RunLog(path)
    assert log.finished("r") == {"t0", "t1", "t2"}
    assert len(log.completed_decisions("r")) == 15
    assert len(log.events("decision")) == 20  # the unfinished task's decisions, redone on resume
    log.write("decision", run="r", phase="evaluation", task_id="t3", decision=0)
    log.write("task_end", run="r", phase="evaluation", task_id="t3", success=True)
    assert len(log.completed_decisions("r")) == 16


class _Fsyncs:
    """A counting ``os.fsync`` for one log file: records how many bytes of the file each
    finished fsync covered."""

    def __init__(self, monkeypatch, path):
        self.path, self.covered, self.calls = path, [], 0
        real = os.fsync

        def fsync(fd):
            stat = os.fstat(fd)
            if (stat.st_dev, stat.st_ino) != self._identity():
                return real(fd)   # the folder's fsync when the file is created
            self.calls += 1
            size = stat.st_size
            real(fd)
            self.covered.append(size)
        monkeypatch.setattr(os, "fsync", fsync)

    def _identity(self):
        stat = os.stat(self.path)
        return stat.st_dev, stat.st_ino

    def durable_bytes(self) -> int:
        return max(self.covered, default=0)


def test_events_are_not_fsynced_one_by_one_and_sync_is_a_barrier(tmp_path, monkeypatch):
    log = RunLog(tmp_path / "log.jsonl")
    log.write("phase_start", phase="evaluation")
    fsyncs = _Fsyncs(monkeypatch, log.path)
    for d in range(100):
        log.write("decision", run="r", phase="evaluation", task_id="t", decision=d)
        log.write("counterfactual", run="r", phase="evaluation", task_id="t", decision=d)
        log.write("task_end", run="r", phase="evaluation", task_id=f"t{d}")
    assert fsyncs.calls == 0
    log.sync()
    assert fsyncs.calls == 1 and fsyncs.durable_bytes() == log.path.stat().st_size
    log.sync()   # nothing new: no fsync
    assert fsyncs.calls == 1
    assert log.finished("r") == {f"t{d}" for d in range(100)}


def test_buffered_events_are_written_at_once_and_durable_before_write_all_returns(
        tmp_path, monkeypatch):
    log = RunLog(tmp_path / "log.jsonl")
    log.write("phase_start", phase="construction")
    fsyncs = _Fsyncs(monkeypatch, log.path)
    buffered = EventBuffer()
    buffered.write("decision", run="build", phase="construction", task_id="b1", decision=0)
    buffered.write("task_end", run="build", phase="construction", task_id="b1")
    assert log.finished("build") == set()  # nothing written until write_all
    log.write_all(buffered)
    assert fsyncs.calls == 1 and fsyncs.durable_bytes() == log.path.stat().st_size
    assert log.finished("build") == {"b1"}


def test_a_failed_fsync_is_raised_not_swallowed(tmp_path, monkeypatch):
    log = RunLog(tmp_path / "log.jsonl")
    log.write("phase_start", phase="evaluation")

    def failing(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing)
    log.write("task_end", run="r", phase="evaluation", task_id="t0")   # returns: not fsynced
    with pytest.raises(OSError, match="fsync failed"):
        log.sync()
    with pytest.raises(OSError, match="fsync failed"):
        log.write("phase_end", phase="evaluation")


_EXITING_WRITER = textwrap.dedent("""
    import atexit, os, sys, threading
    covered, real = [], os.fsync
    release = threading.Event()
    release.set()   # until the task ends below
    path = sys.argv[1]

    def fsync(fd):
        size = os.fstat(fd).st_size
        release.wait(timeout=30)   # the task ends' fsync waits for the exit
        real(fd)
        covered.append(size)
    os.fsync = fsync
    # registered before the log's exit barrier, so it runs after it (last-in first-out)
    atexit.register(lambda: print("durable", max(covered), os.path.getsize(path)))
    from countermem_jax.runtime.runlog import RunLog
    log = RunLog(path)
    log.write("phase_start", phase="evaluation")   # importing the log registered its barrier
    atexit.register(release.set)   # runs before the barrier
    release.clear()
    for t in range(5):
        log.write("decision", run="r", phase="evaluation", task_id=f"t{t}", decision=0)
        log.write("task_end", run="r", phase="evaluation", task_id=f"t{t}", solved=True)
""")


def test_exit_makes_every_line_durable(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("")
    out = subprocess.run([sys.executable, "-c", _EXITING_WRITER, str(path)], capture_output=True,
                         text=True, timeout=60, env=os.environ | {"PYTHONPATH": _ROOT})
    assert out.returncode == 0, out.stderr
    _, covered, size = out.stdout.split()
    assert int(covered) == int(size) > 0


def test_a_forked_child_logs_and_syncs_while_a_parent_thread_holds_the_writer(tmp_path):
    path = tmp_path / "log.jsonl"
    log = RunLog(path)
    log.write("task_end", run="r", phase="evaluation", task_id="parent")
    held, go = threading.Event(), threading.Event()

    def hold():
        with runlog._lock:   # the lock of every append and fsync in this process
            held.set()
            go.wait(timeout=30)
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(timeout=30)
    pid = os.fork()
    if pid == 0:  # the child: its own lock
        code = 1
        try:
            child = RunLog(path)
            child.write("task_end", run="r", phase="evaluation", task_id="child")
            child.write("phase_end", phase="evaluation")
            child.sync()
            code = 0
        finally:
            os._exit(code)
    go.set()
    holder.join()
    for _ in range(600):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child hung on a lock its parent held")
    assert os.waitstatus_to_exitcode(status) == 0
    log.write("task_end", run="r", phase="evaluation", task_id="parent2")
    log.sync()
    assert log.finished("r") == {"parent", "child", "parent2"}


def test_one_writer_per_file_and_a_replaced_file_is_reopened(tmp_path):
    path = tmp_path / "log.jsonl"
    a, b = RunLog(path), RunLog(str(path))
    a.write("task_end", run="r", task_id="x")
    b.write("task_end", run="r", task_id="y")
    assert a.finished("r") == {"x", "y"}
    os.replace(tmp_path / "log.jsonl", tmp_path / "old.jsonl")
    path.write_text('{"event": "task_end", "run": "r", "task_id": "z"}\n')
    a.write("task_end", run="r", task_id="w")
    assert RunLog(path).finished("r") == {"z", "w"}
    assert RunLog(tmp_path / "old.jsonl").finished("r") == {"x", "y"}
