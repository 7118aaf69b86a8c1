"""The decision log's writer: no fsync per decision, durable task boundaries, resumable after a
kill -9 of the writing process."""
import os
import subprocess
import sys
import textwrap

from countermem_jax.runlog import RunLog

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WRITER = textwrap.dedent("""
    import sys, time
    from countermem_jax.runlog import RunLog
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


def test_fsyncs_per_task_are_constant(tmp_path, monkeypatch):
    log = RunLog(tmp_path / "log.jsonl")
    log.write("phase_start", phase="evaluation")
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    per_task = []
    for decisions in (1, 10, 100):
        before = len(calls)
        for d in range(decisions):
            log.write("decision", run="r", task_id=f"n{decisions}", decision=d)
            log.write("counterfactual", run="r", task_id=f"n{decisions}", decision=d)
        log.write("task_end", run="r", task_id=f"n{decisions}", success=True)
        per_task.append(len(calls) - before)
    assert per_task == [1, 1, 1]
    log.write("phase_end", phase="evaluation")
    log.write("transition", seed=0, episode=0)
    log.sync()
    assert len(calls) == 5
    assert log.finished("r") == {"n1", "n10", "n100"}


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
