"""Faults in the run log: a write cut by a kill, a file-size limit or a full disk. The reader
skips the cut line (counted, one warning), the next append starts a new line, a batch is read
whole or not at all, and a resumed phase replays only whole episodes and tasks, so its
artefacts equal an uninterrupted run's."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fault_worker
from countermem_jax.method.memory import load_frozen
from countermem_jax.runtime import runlog
from countermem_jax.runtime.runlog import EventBuffer, RunLog

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fault_worker.py")


def _batch(*task_ids) -> EventBuffer:
    events = EventBuffer()
    for t in task_ids:
        events.write("decision", run="r", task_id=t, decision=0, note="näive ünïcode")
        events.write("task_end", run="r", task_id=t, solved=True)
    return events


def test_a_cut_last_line_is_skipped_counted_and_reported_once(tmp_path, capsys):
    """A kill mid-line, even inside a multi-byte character: the user's phase reads every
    whole event, one warning line names the log, and the cut task is redone."""
    log = RunLog(tmp_path / "log.jsonl")
    log.write("task_end", run="r", task_id="t0")
    log.write("task_end", run="r", task_id="t1", note="ü")
    data = log.path.read_bytes()
    log.path.write_bytes(data[:data.rindex("ü".encode()) + 1])   # half of the "ü"
    capsys.readouterr()
    assert log.finished("r") == {"t0"} and log.skipped == 1
    assert log.finished("r") == {"t0"}
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and str(log.path) in err and "skipped 1 line" in err


def test_an_append_after_a_cut_line_starts_a_new_line(tmp_path):
    """The first event a resumed run appends after a cut line is a line of its own: it is
    read, and the cut line stays skipped (nothing glues onto it, nothing stored is lost)."""
    log = RunLog(tmp_path / "log.jsonl")
    log.write("task_end", run="r", task_id="t0")
    with open(log.path, "ab") as f:
        f.write(b'{"event": "task_end", "run": "r", "ta')
    log.write("task_end", run="r", task_id="t1")
    log.write("task_end", run="r", task_id="t2")
    assert log.finished("r") == {"t0", "t1", "t2"} and log.skipped == 1


def test_an_evaluation_task_cut_mid_line_is_redone_from_its_first_decision(tmp_path):
    """An evaluation task killed while its ``task_end`` was written: the resumed attempt's
    first decision is not glued onto the cut line, so the task's decisions are exactly those
    of the redone attempt (what the metrics are computed from)."""
    log = RunLog(tmp_path / "log.jsonl")
    for d in range(2):
        log.write("decision", run="r", task_id="t0", decision=d, attempt="killed")
    with open(log.path, "ab") as f:
        f.write(b'{"event": "task_end", "run": "r", "task_id": "t0", "sol')
    for d in range(2):
        log.write("decision", run="r", task_id="t0", decision=d, attempt="redone")
    log.write("task_end", run="r", task_id="t0", solved=True)
    decisions = log.completed_decisions("r")
    assert [(e["decision"], e["attempt"]) for e in decisions] == [(0, "redone"), (1, "redone")]


def test_a_batch_cut_at_any_byte_is_absent_and_its_rewrite_is_whole(tmp_path):
    """A ``write_all`` (one construction task, one episode) cut at every byte in turn: the
    reader sees all of it or none of it, and the batch written again on resume is read once,
    whole, beside the events before the cut."""
    path = tmp_path / "log.jsonl"
    RunLog(path).write("task_end", run="r", task_id="t0")
    head = path.read_bytes()
    RunLog(path).write_all(_batch("t1", "t2"))
    batch = path.read_bytes()[len(head):]
    for cut in range(len(batch)):
        path.write_bytes(head + batch[:cut])
        log = RunLog(path)
        whole = cut >= len(batch) - 1   # only the newline missing: every byte of it is there
        assert log.finished("r") == ({"t0", "t1", "t2"} if whole else {"t0"}), cut
        assert len(log.events("decision")) == (2 if whole else 0), cut
        if not whole:
            log.write_all(_batch("t1", "t2"))
            assert log.finished("r") == {"t0", "t1", "t2"}, cut
            assert len(log.events("decision")) == 2, cut
            assert all(runlog.BATCH not in e for e in log.events())


def test_a_batch_cut_at_a_line_boundary_is_absent(tmp_path):
    """A batch whose first lines reached the disk whole and the rest not at all (a full disk
    at a page boundary) is left out: its first task is not counted as done."""
    path = tmp_path / "log.jsonl"
    RunLog(path).write_all(_batch("t1", "t2"))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))
    log = RunLog(path)
    assert log.finished("r") == set() and log.skipped == 2
    log.write("task_end", run="r", task_id="t3")
    assert log.finished("r") == {"t3"}


_FSIZE_WRITER = textwrap.dedent("""
    import resource, sys
    from countermem_jax.runtime.runlog import EventBuffer, RunLog
    from countermem_jax import cli
    log = RunLog(sys.argv[1])
    log.write("task_end", run="r", task_id="t0")
    events = EventBuffer()
    for t in range(50):
        events.write("decision", run="r", task_id="t1", decision=t, q=[0.5] * 20)
    events.write("task_end", run="r", task_id="t1")
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    with cli.one_line_errors():
        log.write_all(events)
""")


def test_a_file_size_limit_mid_write_is_one_line_and_the_cut_batch_is_absent(tmp_path):
    """RLIMIT_FSIZE reached inside a batch's write (a real limit in a child process): the
    user reads one ``error:`` line naming the log and the reason, no traceback; the log keeps
    every earlier event and none of the cut batch."""
    path = tmp_path / "log.jsonl"
    out = subprocess.run([sys.executable, "-c", _FSIZE_WRITER, str(path)], capture_output=True,
                         text=True, timeout=120, env=os.environ | {"PYTHONPATH": _ROOT})
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: {path}: writing the run log failed: File too large"]
    assert path.stat().st_size == 4096 and not path.read_bytes().endswith(b"\n")
    log = RunLog(path)
    assert log.finished("r") == {"t0"} and log.events("decision") == [] and log.skipped > 0


# ------------------------------------------------------------------ a phase resumed after a fault
def _train_result(wd: pathlib.Path) -> dict:
    """What selector training keeps, per seed: best.json, the best checkpoint's parameters,
    the logged transitions and the transition log's arrays."""
    import jax
    from countermem_jax.protocol.analysis import load_selector
    out = {}
    for seed in (0, 1):
        directory = wd / "selector" / f"seed_{seed}"
        params = [np.asarray(x) for x in
                  jax.tree_util.tree_leaves(load_selector(directory).params)]
        transitions = sorted((e["episode"], e["task_id"], e["action"], e["reward"])
                             for e in RunLog(wd / "log.jsonl").events("transition")
                             if e["seed"] == seed)
        with np.load(wd / "selector" / f"transitions_seed{seed}.npz") as npz:
            arrays = {k: npz[k] for k in npz.files}
        out[seed] = (json.loads((directory / "best.json").read_text()), params, transitions,
                     arrays)
    return out


def assert_same_training(want: dict, got: dict) -> None:
    for seed in (0, 1):
        assert got[seed][0] == want[seed][0]
        assert len(got[seed][1]) == len(want[seed][1])
        for x, y in zip(want[seed][1], got[seed][1]):
            np.testing.assert_array_equal(x, y)
        assert got[seed][2] == want[seed][2]
        assert sorted(got[seed][3]) == sorted(want[seed][3])
        for name, array in want[seed][3].items():
            np.testing.assert_array_equal(got[seed][3][name], array, err_msg=name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted scripted run's training artefacts, per wave size."""
    cache = {}

    def get(wave_size: int) -> dict:
        if wave_size not in cache:
            root = tmp_path_factory.mktemp(f"reference_w{wave_size}")
            fault_worker.run(root, root / "wd", wave_size, "build_memory")
            fault_worker.run(root, root / "wd", wave_size, "train_selector")
            cache[wave_size] = _train_result(root / "wd")
        return cache[wave_size]
    return get


def run_with_fault(root, wd, wave_size, phase, fault, at) -> subprocess.CompletedProcess:
    """``phase`` in a child process with ``fault`` injected (``tests/fault_worker.py``)."""
    return subprocess.run([sys.executable, _WORKER, str(root), str(wd), str(wave_size), phase,
                           fault, str(at)], capture_output=True, text=True, timeout=600,
                          env=os.environ | {"PYTHONPATH": _ROOT})


def error_lines(out: subprocess.CompletedProcess) -> list[str]:
    """The ``error:`` lines of a child's stderr (its progress bars' redraws aside)."""
    return [line for line in out.stderr.replace("\r", "\n").splitlines()
            if line.startswith("error:")]


@pytest.fixture
def tmpfs(tmp_path):
    """A 64 MB tmpfs under ``tmp_path`` (root's ``mount -t tmpfs``), unmounted after."""
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"no tmpfs to fill here (mount -t tmpfs: {done.stderr.strip() or 'refused'})")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("wave_size,at", [(1, 2), (4, 2), (1, 5)])
def test_a_kill_mid_episode_write_resumes_to_the_uninterrupted_run(tmp_path, reference,
                                                                    wave_size, at):
    """SIGKILL half way through an episode's transitions (two of them): the user reruns the
    command; the half-written episode is run again, not counted as done, and the selector's
    checkpoints, parameters and transitions are the uninterrupted run's."""
    wd = tmp_path / "wd"
    fault_worker.run(tmp_path, wd, wave_size, "build_memory")
    out = run_with_fault(tmp_path, wd, wave_size, "train_selector", "kill_mid_write", at)
    assert out.returncode == -9, out.stderr
    assert not wd.joinpath("log.jsonl").read_bytes().endswith(b"\n")   # the cut line is there
    fault_worker.run(tmp_path, wd, wave_size, "train_selector")
    assert_same_training(reference(wave_size), _train_result(wd))


def test_a_file_size_limit_mid_episode_write_resumes_to_the_uninterrupted_run(tmp_path,
                                                                            reference):
    """RLIMIT_FSIZE reached inside an episode's write: the user reads one ``error:`` line
    naming the run log (no traceback); once the limit is lifted the same command resumes to
    the uninterrupted run's selector."""
    wd = tmp_path / "wd"
    fault_worker.run(tmp_path, wd, 1, "build_memory")
    out = run_with_fault(tmp_path, wd, 1, "train_selector", "fsize_mid_write", 2)
    assert out.returncode == 1, out.stderr
    assert error_lines(out) == [f"error: {wd / 'log.jsonl'}: writing the run log failed: "
                                "File too large"]
    assert "Traceback" not in out.stderr
    fault_worker.run(tmp_path, wd, 1, "train_selector")
    assert_same_training(reference(1), _train_result(wd))


def test_a_full_disk_mid_episode_write_resumes_to_the_uninterrupted_run(tmpfs, reference):
    """The disk (a tmpfs) fills inside an episode's write: one ``error:`` line naming the run
    log; once space is freed the same command resumes to the uninterrupted run's selector."""
    wd = tmpfs / "wd"
    fault_worker.run(tmpfs.parent, wd, 1, "build_memory")
    out = run_with_fault(tmpfs.parent, wd, 1, "train_selector", "full_mid_write", 2)
    assert out.returncode == 1, out.stderr
    assert error_lines(out) == [f"error: {wd / 'log.jsonl'}: writing the run log failed: "
                                "No space left on device"]
    assert "Traceback" not in out.stderr
    (tmpfs / "filler").unlink()
    fault_worker.run(tmpfs.parent, wd, 1, "train_selector")
    assert_same_training(reference(1), _train_result(wd))


def test_a_kill_mid_construction_write_resumes_to_the_uninterrupted_store(tmp_path):
    """SIGKILL half way through a construction task's events: the rerun redoes that task; the
    frozen store is the uninterrupted run's and the log holds each task's events once."""
    ref = tmp_path / "ref"
    fault_worker.run(tmp_path, ref, 1, "build_memory")
    wd = tmp_path / "wd"
    out = run_with_fault(tmp_path, wd, 1, "build_memory", "kill_mid_write", 1)
    assert out.returncode == -9, out.stderr
    fault_worker.run(tmp_path, wd, 1, "build_memory")
    assert load_frozen(wd / "store_frozen.jsonl").build_hash() == \
        load_frozen(ref / "store_frozen.jsonl").build_hash()
    events = [(e["event"], e.get("task_id"), e.get("decision"))
              for e in RunLog(wd / "log.jsonl").events() if e.get("phase") == "construction"
              and e["event"] in ("decision", "counterfactual", "task_end")]
    assert events == [(e["event"], e.get("task_id"), e.get("decision"))
                      for e in RunLog(ref / "log.jsonl").events()
                      if e.get("phase") == "construction"
                      and e["event"] in ("decision", "counterfactual", "task_end")]


def test_the_logs_other_readers_and_the_studies_copy_read_whole_events(tmp_path):
    """A study copying a build's log into a variant, and ``inspect_store --workdir``'s reader:
    a cut line in the source is left out (not a traceback), and the copy starts on a new line
    after a cut line in its destination, so no event is lost or glued."""
    from countermem_jax.protocol import record_at_work
    from countermem_jax.studies import runner
    src, dst = tmp_path / "src", tmp_path / "dst"
    log = RunLog(src / "log.jsonl")
    log.write("counterfactual", phase="construction", task_id="t0")
    log.write("task_end", phase="selector_training", task_id="t1")
    log.write("counterfactual", phase="construction", task_id="t2")
    data = log.path.read_bytes()
    log.path.write_bytes(data[:-9])                       # the last event cut mid-line
    assert [e["task_id"] for e in record_at_work._rows(log.path)] == ["t0", "t1"]
    dst.mkdir()
    (dst / "log.jsonl").write_bytes(b'{"event": "task_end", "ta')   # a cut line of its own
    runner._copy_log_events(src, dst, "construction")
    copied = RunLog(dst / "log.jsonl").events()
    assert [(e["event"], e["task_id"]) for e in copied] == [("counterfactual", "t0")]


def test_a_kill_between_a_tasks_log_and_the_store_save_counts_the_task_once(tmp_path):
    """SIGKILL after a construction task's events are durable but before the store names the
    task: the rerun redoes it (a ``construction_redo`` event says so) and construction's tally
    of checks, verified and admitted candidates is the uninterrupted run's, not counted twice."""
    from countermem_jax.protocol import construction_tally
    ref, wd = tmp_path / "ref", tmp_path / "wd"
    fault_worker.run(tmp_path, ref, 1, "build_memory")
    out = run_with_fault(tmp_path, wd, 1, "build_memory", "kill_before_store_save", 1)
    assert out.returncode == -9, out.stderr
    fault_worker.run(tmp_path, wd, 1, "build_memory")
    assert load_frozen(wd / "store_frozen.jsonl").build_hash() == \
        load_frozen(ref / "store_frozen.jsonl").build_hash()
    events = RunLog(wd / "log.jsonl").events()
    assert [e["task_ids"] for e in events if e["event"] == construction_tally.REDO]
    everything = [e for e in events if e["event"] == "counterfactual"]
    standing = construction_tally.standing(events)
    want = construction_tally.tally(
        construction_tally.standing(RunLog(ref / "log.jsonl").events()))
    assert len(everything) > len(standing) and want["checks"] > 0
    assert construction_tally.tally(standing) == want
