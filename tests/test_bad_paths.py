"""Issue 39, bad paths: every binary given a path it cannot use ends in one line on stderr, exit
status 1, no traceback, nothing left behind and nothing stored lost; SIGINT ends a build in one
line saying it can resume (exit status 130); a run refused before it started leaves nothing; the
report and the sweep's skip check verify a frozen store against its recorded hash.

The binaries run as subprocesses, as a user runs them
(``benchmarks.security.hostile_paths``, the bad-paths family of the hostile catalogue;
``benchmarks/security/hostile.py`` runs all of its cases).
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from benchmarks.security import hostile_paths
from helpers import config_without_model

REPO = pathlib.Path(__file__).resolve().parents[1]

# The thirteen bad paths of issue 39, then those it implies (a refused run on a mistyped
# workdir, a report over a truncated store, the other binaries' configs) and SIGINT.
ISSUE_CASES = [
    "paths/build_memory/workdir_under_read_only_mount",
    "paths/train_selector/workdir_under_read_only_mount",
    "paths/evaluate/workdir_under_read_only_mount",
    "paths/build_memory/read_only_finished_workdir",
    "paths/train_selector/read_only_finished_workdir",
    "paths/evaluate/read_only_finished_workdir",
    "paths/inspect_store/workdir_missing",
    "paths/inspect_store/workdir_is_a_file",
    "paths/inspect_store/workdir_with_truncated_store",
    "paths/report/out_read_only",
    "paths/report/out_is_a_file",
    "paths/preflight/config_missing",
    "paths/preflight/config_is_a_directory",
    "paths/train_selector/mistyped_workdir",
    "paths/evaluate/mistyped_workdir",
    "paths/report/truncated_store",
    "paths/study_cost/config_is_a_directory",
    "paths/build_memory/config_missing",        # with an override applied to the missing file
    "paths/evaluate/config_is_a_directory",
    "paths/study/read_only_finished_workdir",
]


def _run_case(name):
    try:
        return hostile_paths.run(name)
    except hostile_paths.Skip as why:
        pytest.skip(str(why))


@pytest.mark.parametrize("name", ISSUE_CASES)
def test_a_bad_path_is_one_line_and_leaves_everything_as_it_was(name, benchdata):
    line, _, identical, failures = _run_case(name)
    assert failures == [], f"{name}: {failures} ({line})"
    assert identical and line.startswith("error: ")


def test_sigint_mid_build_is_one_line_saying_it_can_resume(benchdata):
    line, _, _, failures = _run_case(hostile_paths.SIGINT_CASE)
    assert failures == [], f"{failures} ({line})"
    assert line == hostile_paths.RESUME


def test_the_catalogue_has_thirty_distinct_cases_over_every_binary():
    assert len(set(hostile_paths.NAMES)) == len(hostile_paths.NAMES) >= 30
    binaries = {name.split("/")[1] for name in hostile_paths.NAMES}
    assert binaries == {"build_memory", "train_selector", "evaluate", "study", "inspect_store",
                        "report", "preflight", "study_cost", "sweep"}


# ------------------------------------------------------------------ a refused run leaves nothing
def _phase_config():
    return config_without_model(REPO / hostile_paths.PHASE_CONFIG)


def test_a_refused_train_selector_leaves_an_existing_empty_workdir_empty(tmp_path, benchdata):
    wd = tmp_path / "wd"
    wd.mkdir()
    out = subprocess.run([sys.executable, "-m", "countermem_jax.train_selector",
                          f"--config={hostile_paths.PHASE_CONFIG}", f"--workdir={wd}",
                          hostile_paths.NO_MODEL], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert out.returncode == 1 and "no frozen store" in out.stderr, out.stderr
    assert list(wd.iterdir()) == []   # no fingerprint.json, no .locks


def test_a_refusal_after_the_phase_wrote_keeps_its_fingerprint(tmp_path):
    """Only a run that wrote nothing is taken back: results keep the config they were made
    with."""
    from countermem_jax.phases import PhaseError, workdir_guard
    cfg = _phase_config()
    wd = tmp_path / "new" / "wd"
    with pytest.raises(PhaseError):
        with workdir_guard.enter_phase(cfg, wd, "build_memory"):
            raise PhaseError("refused before writing")
    assert not (tmp_path / "new").exists()
    with pytest.raises(PhaseError):
        with workdir_guard.enter_phase(cfg, wd, "build_memory"):
            (wd / "store.jsonl").write_text("partial")
            raise PhaseError("refused after writing")
    assert (wd / "fingerprint.json").exists() and (wd / "store.jsonl").exists()


# ------------------------------------------------------------------ integrity on read
def test_report_refuses_a_truncated_store_and_reports_an_intact_one(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the report needs the plots extra (matplotlib)")
    from countermem_jax import report
    wd = hostile_paths.evaluated_workdir(tmp_path / "wd")
    assert report.main([str(wd), "--out", str(tmp_path / "ok")]) == 0
    hostile_paths.truncate(wd / "store_frozen.jsonl")
    capsys.readouterr()
    assert report.main([str(wd), "--out", str(tmp_path / "bad")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert "does not match the hash recorded when it was frozen" in err
    assert not (tmp_path / "bad").exists()


def test_report_takes_absl_flags(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "countermem_jax.report", "--helpfull"],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert "--out" in out.stdout + out.stderr and "Traceback" not in out.stderr
    assert "usage:" not in out.stderr   # not argparse's error
    wd = hostile_paths.evaluated_workdir(tmp_path / "wd")
    done = subprocess.run([sys.executable, "-m", "countermem_jax.report", str(wd),
                           f"--out={tmp_path / 'r'}"], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "report.md").exists()


def test_the_sweep_does_not_skip_a_build_whose_store_was_truncated(tmp_path):
    import sweep_helpers
    from countermem_jax.sweep import execute, graph
    path = sweep_helpers.write_sweep(tmp_path, tmp_path / "root", benchmarks=("sweep_pets",),
                                     methods=("countermem",), seeds=(0,))
    build = next(r for r in graph.build_graph(sweep_helpers.load_sweep(path))
                 if r.phase == "build_memory")
    pathlib.Path(build.workdir).mkdir(parents=True)
    hostile_paths.frozen_store(pathlib.Path(build.workdir) / "store_frozen.jsonl")
    build.marker.parent.mkdir(parents=True)
    build.marker.write_text(json.dumps({"run": build.name}))
    assert execute.is_finished(build)
    hostile_paths.truncate(pathlib.Path(build.workdir) / "store_frozen.jsonl")
    assert not execute.is_finished(build)
