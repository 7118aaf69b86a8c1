"""Faults between phases: a phase started while one whose outputs it reads (or that reads its
outputs) runs on the workdir, a frozen store's hash file deleted, a sweep whose outputs changed
after their done markers, and a workdir whose name is not UTF-8. Each case states what the user
gets and that nothing stored is lost. The phases run with the scripted backbone on the small
people benchmark (tests/test_pipeline.py), the sweeps on the scripted server
(tests/sweep_fixture.py)."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import sweep_fixture
import sweep_helpers
from countermem_jax import experiment
from countermem_jax.phases import workdir_guard
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.sweep import graph, run_sweep
from fault_helpers import REPO, phase_running, stored, wait_for
from test_pipeline import _config, people_benchmark, scripted  # noqa: F401 (fixture)


def _built(tmp_path, people_benchmark, selector="dqn"):
    cfg = _config(tmp_path, selector=selector)
    wd = tmp_path / "wd"
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    return cfg, wd


# ----------------------------------------------------------------------------- phases in order
# Trains on a built workdir; the first training draft of t1 waits for the file ``go``.
TRAINER = """
import sys, pathlib, time
sys.path.insert(0, {tests!r})
import test_pipeline as tp
from countermem_jax import experiment
from benchmarks.testing.scripted_backbone import Rule
tmp = pathlib.Path({tmp!r})
go = tmp / "go"
def wait_then_draft(messages):
    (tmp / "training").touch()
    while not go.exists():
        time.sleep(0.05)
    return tp._draft_for("t1")
fake = tp.scripted()
fake.rules.insert(0, Rule(wait_then_draft, template="DRAFT_ACTION", task="/t1#", times=1))
experiment.train_selector(tp._config(tmp, selector="dqn"), {workdir!r}, backbone=fake,
                          benchmark=tp.people_benchmark.__wrapped__(tmp))
"""


def test_evaluate_while_training_runs_is_refused_and_then_uses_the_chosen_checkpoint(
        tmp_path, people_benchmark):
    """``evaluate`` started while ``train_selector`` runs on the workdir (another process) would
    evaluate a checkpoint training had not chosen: the user gets one line naming
    train_selector, its pid and host, and the refused evaluate writes nothing (no eval/, no
    metrics.json, the fingerprints as they were). Once training has finished, evaluate runs and
    metrics.json records, per seed, the step and fingerprint training recorded as best."""
    cfg, wd = _built(tmp_path, people_benchmark)
    helper = tmp_path / "trainer"
    helper.mkdir()
    script = textwrap.dedent(TRAINER).format(tests=os.path.dirname(__file__), tmp=str(helper),
                                             workdir=str(wd))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        wait_for(helper / "training", proc)
        fingerprints = (wd / "fingerprint.json").read_bytes()
        with pytest.raises(workdir_guard.WorkdirBusy) as err:
            experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
        line = str(err.value)
        assert line.startswith(f"workdir {wd}: evaluate reads what train_selector writes, and "
                               f"train_selector is running on it (pid {proc.pid} on host ")
        assert "\n" not in line and line.endswith("run evaluate once it has finished")
        assert not (wd / "eval").exists() and not list(wd.glob("metrics*.json"))
        assert (wd / "fingerprint.json").read_bytes() == fingerprints
        (helper / "go").touch()
        out, errors = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, errors
    result = experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    recorded = json.loads((wd / "selector" / "fingerprints.json").read_text())
    written = json.loads((wd / "metrics.json").read_text())["checkpoints"]
    assert written == result["checkpoints"]
    assert set(written) == {"0", "1"}
    for seed, used in written.items():
        assert (used["step"], used["fingerprint"]) == (recorded[seed]["step"],
                                                       recorded[seed]["fingerprint"])
        assert used["path"] == f"selector/seed_{seed}/{recorded[seed]['step']}"
        assert result["verified_unchanged"][f"selector_checkpoint_seed{seed}"] == \
            used["fingerprint"]


# (running phase, what it reads, the phase started, the line's start after "workdir WD: ")
ORDER = [
    ("build_memory", (), "train_selector",
     "train_selector reads what build_memory writes, and build_memory is running on it"),
    ("build_memory", (), "evaluate",
     "evaluate reads what build_memory writes, and build_memory is running on it"),
    ("train_selector", ("build_memory",), "build_memory",
     "train_selector is running on it and reads what build_memory writes"),
    ("evaluate", ("build_memory", "train_selector"), "train_selector",
     "evaluate is running on it and reads what train_selector writes"),
    ("evaluate", ("build_memory", "train_selector"), "build_memory",
     "evaluate is running on it and reads what build_memory writes"),
]


@pytest.mark.parametrize("running,reads,started,says", ORDER,
                         ids=[f"{s}_while_{r}" for r, _, s, _ in ORDER])
def test_a_phase_beside_one_it_reads_from_or_feeds_is_refused(tmp_path, people_benchmark,
                                                              running, reads, started, says):
    """A phase started while another process runs a phase whose outputs it reads (or one that
    reads its outputs) on the same workdir: the user gets one line naming the running phase, its
    pid and host, before any model or data is touched; every stored file is as it was, and once
    the other phase has ended the phase may start."""
    cfg, wd = _built(tmp_path, people_benchmark)
    before = stored(wd)
    with phase_running(wd, running, reads, flags_dir=tmp_path) as pid:
        with pytest.raises(workdir_guard.WorkdirBusy) as err:
            getattr(experiment, started)(cfg, wd, backbone=scripted(),
                                         benchmark=people_benchmark)
    line = str(err.value)
    assert line.startswith(f"workdir {wd}: {says} (pid {pid} on host ") and "\n" not in line
    assert stored(wd) == before
    with workdir_guard.enter_phase(cfg, wd, started):   # the other phase has ended: it may run
        pass


def test_a_fixed_selector_evaluates_while_training_runs(tmp_path, people_benchmark):
    """A fixed selector reads no checkpoint: evaluate with it is not refused while another
    process trains the DQN selector on the workdir."""
    cfg, wd = _built(tmp_path, people_benchmark, selector="always_top1")
    with phase_running(wd, "train_selector", ("build_memory",), flags_dir=tmp_path):
        result = experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    assert "checkpoints" not in result and (wd / "metrics_always_top1.json").exists()


def test_inspect_store_refuses_a_workdir_being_evaluated(tmp_path, people_benchmark):
    """``inspect_store --workdir`` while evaluate runs there: one line naming evaluate and its
    pid, exit status 1, nothing changed; afterwards it prints the record at work."""
    cfg, wd = _built(tmp_path, people_benchmark, selector="always_top1")
    experiment.evaluate(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    before = stored(wd)
    command = [sys.executable, "-m", "countermem_jax.inspect_store", f"--workdir={wd}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with phase_running(wd, "evaluate", ("build_memory",), flags_dir=tmp_path) as pid:
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().startswith(f"error: workdir {wd}: inspect_store reads what "
                                         f"evaluate writes, and evaluate is running on it "
                                         f"(pid {pid} on host ")
    assert "\n" not in out.stderr.strip() and stored(wd) == before
    assert subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=300).returncode == 0


# ----------------------------------------------------------------------------- the frozen hash
def test_a_deleted_store_hash_is_restored_from_the_run_log(tmp_path, people_benchmark):
    """``store_frozen.sha256`` deleted after the build: training says in one line to run
    build_memory again; build_memory restores the file (same bytes) from the hash the run log
    recorded at freezing, without rebuilding, and training then runs."""
    cfg, wd = _built(tmp_path, people_benchmark)
    hash_bytes, store_bytes = (wd / "store_frozen.sha256").read_bytes(), \
        (wd / "store_frozen.jsonl").read_bytes()
    (wd / "store_frozen.sha256").unlink()
    with pytest.raises(experiment.PhaseError, match="store_frozen.sha256: missing; run "
                                                    "build_memory again to restore it"):
        experiment.train_selector(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    assert (wd / "store_frozen.sha256").read_bytes() == hash_bytes
    assert (wd / "store_frozen.jsonl").read_bytes() == store_bytes
    experiment.train_selector(cfg, wd, backbone=scripted(), benchmark=people_benchmark)


def test_a_deleted_store_hash_the_log_cannot_vouch_for_is_one_line(tmp_path, people_benchmark):
    """The hash file deleted and the run log's record of it gone too: build_memory refuses in
    one line (the store cannot be proven the one construction froze) and keeps the store."""
    cfg, wd = _built(tmp_path, people_benchmark)
    store_bytes = (wd / "store_frozen.jsonl").read_bytes()
    (wd / "store_frozen.sha256").unlink()
    log = wd / "log.jsonl"
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines()
                           if '"phase_end"' not in line))
    with pytest.raises(experiment.PhaseError) as err:
        experiment.build_memory(cfg, wd, backbone=scripted(), benchmark=people_benchmark)
    assert "store_frozen.sha256: missing, and the run log records no hash" in str(err.value)
    assert "\n" not in str(err.value)
    assert (wd / "store_frozen.jsonl").read_bytes() == store_bytes
    assert not (wd / "store_frozen.sha256").exists()


# ----------------------------------------------------------------------------- the sweep
@pytest.fixture
def swept(tmp_path, monkeypatch):
    """One CounterMem workdir (one seed) swept to the end with the scripted server; yields
    (sweep, runs, workdir, rerun) where ``rerun()`` sweeps again with the report and returns
    (outcome, lines)."""
    monkeypatch.setitem(sys.modules, "ray", None)
    path = sweep_helpers.write_sweep(tmp_path, tmp_path / "root", benchmarks=("sweep_pets",),
                                     methods=("countermem",), seeds=(0,))
    sweep = sweep_helpers.load_sweep(path)
    with sweep_fixture.ScriptedServer() as server:
        monkeypatch.setenv("COUNTERMEM_LLM_URLS", server.base_url)
        assert run_sweep(sweep, local=True, report=False, echo=lambda line: None).ok
        runs = graph.build_graph(sweep)
        sweep.report = True

        def rerun():
            lines = []
            return run_sweep(sweep, local=True, echo=lines.append), lines
        yield sweep, runs, pathlib.Path(runs[0].workdir), rerun


def _ends(log: pathlib.Path) -> dict:
    return {e["task_id"]: e["solved"] for e in RunLog(log).events("task_end")}


def test_a_sweep_redoes_an_evaluation_whose_log_was_cut_after_its_marker(swept):
    """An evaluation's run log cut after its done marker (its last result lost): the next sweep
    says which run it redoes and why, redoes only it (the build and training are skipped),
    and writes the report; the results equal the uncut run's."""
    sweep, runs, wd, rerun = swept
    log = wd / "eval" / "countermem-dqn-seed0" / "log.jsonl"
    ends = _ends(log)
    lines = log.read_bytes().splitlines(keepends=True)
    last_end = max(i for i, line in enumerate(lines) if b'"task_end"' in line)
    log.write_bytes(b"".join(lines[:last_end]))
    outcome, said = rerun()
    evaluation = next(r for r in runs if r.phase == "evaluate")
    assert any(line.startswith(f"redo: {evaluation.name}: finished before, but its outputs are "
                               "not whole") and "has no result for 1 of 2" in line
               for line in said), said
    assert outcome.states[evaluation.name] == "done"
    assert {s for n, s in outcome.states.items() if n != evaluation.name} == {"skipped"}
    assert _ends(log) == ends
    assert f"report: {pathlib.Path(sweep.root) / 'report' / 'report.md'}" in said


def test_a_sweep_restores_a_deleted_store_hash_before_skipping_the_rest(swept):
    """``store_frozen.sha256`` deleted after the sweep: the next sweep redoes the build, which
    restores the file byte for byte from the run log (no construction task runs again); training
    and evaluation are skipped and the report is written."""
    sweep, runs, wd, rerun = swept
    hash_bytes, store_bytes = (wd / "store_frozen.sha256").read_bytes(), \
        (wd / "store_frozen.jsonl").read_bytes()
    (wd / "store_frozen.sha256").unlink()
    outcome, said = rerun()
    build = next(r for r in runs if r.phase == "build_memory")
    assert any(line.startswith(f"redo: {build.name}:") for line in said), said
    assert outcome.ok and outcome.states[build.name] == "done"
    assert (wd / "store_frozen.sha256").read_bytes() == hash_bytes
    assert (wd / "store_frozen.jsonl").read_bytes() == store_bytes
    assert {s for n, s in outcome.states.items() if n != build.name} == {"skipped"}
    assert any(line.startswith("report: ") and "not written" not in line for line in said)


def test_a_sweep_that_cannot_write_the_report_names_the_run_to_redo(swept):
    """A metrics file the report cannot trust (its seeds a number) whose run looks finished:
    the user gets one line saying why the report was not written and which run to redo (and
    the marker to delete); the workdir's files stay as they were."""
    sweep, runs, wd, rerun = swept
    metrics = json.loads((wd / "metrics.json").read_text())
    metrics["seeds"] = 3
    (wd / "metrics.json").write_text(json.dumps(metrics))
    before = stored(wd)
    outcome, said = rerun()
    evaluation = next(r for r in runs if r.phase == "evaluate")
    line = next(line for line in said if line.startswith("report: not written: "))
    assert "metrics.json: field 'seeds' is a number" in line
    assert f"redo {evaluation.name}: delete {evaluation.marker} and run the sweep again" in line
    assert {k: v for k, v in stored(wd).items() if not k.startswith(".sweep")} == \
        {k: v for k, v in before.items() if not k.startswith(".sweep")}


# ----------------------------------------------------------------------------- paths
@pytest.mark.parametrize("binary", ["build_memory", "train_selector", "evaluate",
                                    "inspect_store"])
def test_a_workdir_whose_name_is_not_utf8_is_one_line(tmp_path, binary):
    """A ``--workdir`` whose name holds bytes that are not UTF-8 (Orbax cannot open such a
    path): one line showing the name with the bytes escaped, exit status 1, before anything is
    made; nothing is created beside it."""
    parent = tmp_path / "parent"
    parent.mkdir()
    workdir = os.fsencode(parent) + b"/wd\xff"
    out = subprocess.run([sys.executable, "-m", f"countermem_jax.{binary}",
                          "--config=configs/spider_react_cpu.py",
                          b"--workdir=" + workdir,
                          "--config.backbone.model_path=/nonexistent.gguf"],
                         capture_output=True, cwd=REPO, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    err = out.stderr.decode("utf-8").strip()
    assert out.returncode == 1 and "\n" not in err, err
    assert err.startswith(f"error: --workdir={parent}/wd\\xff: the name is not valid UTF-8")
    assert list(parent.iterdir()) == []


def test_the_library_refuses_a_workdir_whose_name_is_not_utf8(tmp_path, people_benchmark):
    """Called as a library (the sweep, a notebook): the same one line, nothing made."""
    cfg = _config(tmp_path)
    with pytest.raises(ValueError, match=r"workdir=.*wd\\xff: the name is not valid UTF-8"):
        experiment.build_memory(cfg, os.fsdecode(os.fsencode(tmp_path) + b"/wd\xff"),
                                backbone=scripted(), benchmark=people_benchmark)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("wd")]
