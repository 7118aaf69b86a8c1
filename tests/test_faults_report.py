"""Faults the report meets in what it reads: a malformed file is one line naming it, one workdir
given twice is refused, a workdir a phase is writing is refused; every refusal exits 1 before
``--out`` exists and leaves the workdirs byte for byte as they were."""
import json
import os
import shutil

import pytest

pytest.importorskip("matplotlib", reason="the report needs the plots extra (matplotlib)")
from countermem_jax import report  # noqa: E402
from countermem_jax.reporting import load  # noqa: E402
from fault_helpers import phase_running, stored  # noqa: E402
from test_report import _ids, _outcomes, _workdir  # noqa: E402


def _evaluated(root, solved=(1, 0, 1, 1)):
    ids = _ids(len(solved))
    return _workdir(root, "countermem", {
        "base": _outcomes(ids, [0] * len(solved)),
        "countermem-dqn-seed0": (0, _outcomes(ids, solved))}, ids, seeds=["0"])


def _refused(capsys, dirs, out) -> str:
    before = {str(d): stored(d) for d in dirs if d.is_dir()}
    assert report.main([str(d) for d in dirs] + ["--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert not out.exists()
    assert {str(d): stored(d) for d in dirs if d.is_dir()} == before
    return err


def _edit_metrics(change):
    def damage(wd):
        metrics = json.loads((wd / "metrics.json").read_text())
        change(metrics)
        (wd / "metrics.json").write_text(json.dumps(metrics))
    return damage


def _write(name, data: bytes):
    def damage(wd):
        (wd / name).parent.mkdir(parents=True, exist_ok=True)
        (wd / name).write_bytes(data)
    return damage


def _append_end(**fields):
    def damage(wd):
        log = wd / "eval" / "countermem-dqn-seed0" / "log.jsonl"
        ends = [json.loads(line) for line in log.read_text().splitlines()]
        ends[-1].update(fields)
        log.write_text("".join(json.dumps(e) + "\n" for e in ends))
    return damage


# (case, damage, the file the line names, what it says)
MALFORMED = [
    ("metrics_is_a_list", _write("metrics.json", b"[1, 2, 3]"), "metrics.json",
     "its metrics file is a list, expected an object"),
    ("metrics_not_json", _write("metrics.json", b"{\"runs\": "), "metrics.json", "not JSON"),
    ("metrics_not_utf8", _write("metrics.json", b"{\"agent\": \"\xff\xfe\"}"), "metrics.json",
     "not UTF-8"),
    ("runs_is_a_string", _edit_metrics(lambda m: m.update(runs="base")), "metrics.json",
     "field 'runs' is a string, expected an object"),
    ("seeds_is_a_number", _edit_metrics(lambda m: m.update(seeds=3)), "metrics.json",
     "field 'seeds' is a number, expected a list"),
    ("method_is_a_list", _edit_metrics(lambda m: m.update(method=["countermem"])),
     "metrics.json", "field 'method' is a list"),
    ("groups_is_an_object", _edit_metrics(lambda m: m.update(
        aggregate={"per_task": {"task_ids": ["e000"], "groups": {"e000": "g"}}})),
     "metrics.json", "aggregate.per_task.groups"),
    ("run_name_leaves_eval", _edit_metrics(lambda m: m["runs"].update({"../../x": "y"})),
     "metrics.json", "is not a run directory"),
    ("splits_is_a_list", _write("splits.json", b"[]"), "splits.json", "is a list"),
    ("eval_split_is_an_object", _write("splits.json", b"{\"eval\": {\"e000\": 1}}"),
     "splits.json", "part 'eval' is an object"),
    ("fingerprint_entry_is_a_string", _write("fingerprint.json", b"{\"build_memory\": \"x\"}"),
     "fingerprint.json", "entry 'build_memory' is a string"),
    ("selector_fingerprints_a_list", _write("selector/fingerprints.json", b"[0]"),
     "fingerprints.json", "is a list"),
    ("best_json_returns_a_list", _write("selector/seed_0/best.json", b"{\"val_returns\": [1]}"),
     "best.json", "'val_returns' is a list"),
    ("store_hash_not_utf8", _write("store_frozen.sha256", b"\xff" * 64), "store_frozen.sha256",
     "not UTF-8"),
    ("code_version_not_utf8", _write("code_version.txt", b"v1\xff"), "code_version.txt",
     "not UTF-8"),
    ("solved_is_a_string", _append_end(solved="yes"), "log.jsonl",
     "line 4: task_end's 'solved' is a string"),
    ("tokens_is_a_list", _append_end(tokens=[100]), "log.jsonl", "'tokens' is a list"),
]


@pytest.mark.parametrize("name,damage,file,says", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_a_malformed_input_is_one_line_naming_the_file(tmp_path, capsys, name, damage, file,
                                                       says):
    """The user gets ``error: <the file>: <what it holds>, expected ...`` and exit status 1, no
    traceback, no ``--out``; the workdir keeps every byte (the report only reads)."""
    wd = _evaluated(tmp_path / "wd")
    assert report.main([str(wd), "--out", str(tmp_path / "ok")]) == 0
    capsys.readouterr()
    damage(wd)
    err = _refused(capsys, [wd], tmp_path / "out")
    assert file in err and says in err, err


def test_damaged_log_lines_are_skipped_and_the_missing_task_is_named(tmp_path, capsys):
    """A log line that is not UTF-8, not JSON, or JSON but no object is no result: the user gets
    one line saying how many held-out tasks have none (as for a cut line), nothing written."""
    wd = _evaluated(tmp_path / "wd")
    log = wd / "eval" / "countermem-dqn-seed0" / "log.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:1] + [b"\xff\xfe\n", b"[1, 2]\n", b"\"text\"\n"] + lines[2:]))
    err = _refused(capsys, [wd], tmp_path / "out")
    assert f"{log}: run countermem-dqn-seed0 has no result for 1 of 4" in err


# ----------------------------------------------------------------- one workdir given twice
@pytest.mark.parametrize("how", ["same_path", "symlink", "copy", "copy_via_symlink"])
def test_one_workdir_given_twice_is_refused(tmp_path, capsys, how):
    """The same workdir by its path twice, through a symlink, or as a copy (``cp -r``) would be
    pooled as two runs of each arm (n doubled, the CI too narrow): the user gets one line naming
    both and exit status 1, nothing written, both directories as they were."""
    wd = _evaluated(tmp_path / "wd")
    other = tmp_path / "other"
    if how == "same_path":
        other = wd
    elif how == "symlink":
        other.symlink_to(wd, target_is_directory=True)
    else:
        shutil.copytree(wd, tmp_path / "copy")
        other = tmp_path / "copy"
        if how == "copy_via_symlink":
            (tmp_path / "link").symlink_to(other, target_is_directory=True)
            other = tmp_path / "link"
    err = _refused(capsys, [wd, other], tmp_path / "out")
    assert f"refusing to pool {wd} and {other}" in err and "give each workdir once" in err
    assert ("a copy" in err) == how.startswith("copy")


def test_two_evaluations_with_the_same_outcomes_are_still_pooled(tmp_path):
    """Two workdirs evaluated apart with equal per-task outcomes are two runs (their metrics
    files name their own paths): pooled, n = 2."""
    a, b = _evaluated(tmp_path / "a"), _evaluated(tmp_path / "b")
    arms, _ = load.load_all([a, b])
    assert {arm.label: len(arm.runs) for arm in arms} == {"None": 2, "CounterMem": 2}


# ----------------------------------------------------------------- a phase writing the workdir
@pytest.mark.parametrize("phase", ["evaluate", "train_selector", "build_memory"])
def test_a_workdir_a_phase_is_writing_is_refused(tmp_path, capsys, phase):
    """While another process runs ``phase`` on the workdir (metrics, checkpoints or the store
    may be half written) the user gets one line naming the phase and its pid, exit status 1;
    once it has finished the same command writes the report. Nothing stored changes."""
    wd = _evaluated(tmp_path / "wd")
    (wd / ".locks").mkdir()
    with phase_running(wd, phase, flags_dir=tmp_path) as pid:
        err = _refused(capsys, [wd], tmp_path / "out")
    assert f"workdir {wd}: the report reads what {phase} writes, and {phase} is running" in err
    assert f"pid {pid} on host" in err
    assert report.main([str(wd), "--out", str(tmp_path / "out")]) == 0


def test_a_read_only_workdir_never_locked_is_reported(tmp_path):
    """A workdir without a lock folder (copied results) is read without making one."""
    wd = _evaluated(tmp_path / "wd")
    assert report.main([str(wd), "--out", str(tmp_path / "out")]) == 0
    assert not (wd / ".locks").exists()


def test_metrics_naming_a_checkpoint_training_did_not_choose_are_refused(tmp_path, capsys):
    """metrics.json records the checkpoint each seed was evaluated with; when training records
    another step as that seed's best, the user gets one line naming both steps, nothing
    written."""
    wd = _evaluated(tmp_path / "wd")
    (wd / "selector").mkdir()
    (wd / "selector" / "fingerprints.json").write_text(json.dumps(
        {"0": {"step": 6, "fingerprint": "a" * 64}}))
    _edit_metrics(lambda m: m.update(checkpoints={"0": {"step": 3, "fingerprint": "b" * 64}}))(wd)
    err = _refused(capsys, [wd], tmp_path / "out")
    assert "seed 0 was evaluated with the checkpoint of step 3" in err and "records step 6" in err


def test_a_run_directory_whose_name_is_not_utf8_is_one_line(tmp_path, capsys):
    """A run directory named with bytes that are not UTF-8: one line showing them escaped."""
    wd = _evaluated(tmp_path / "wd")
    odd = os.fsdecode(os.fsencode(tmp_path) + b"/wd\xff")
    os.rename(wd, odd)
    assert report.main([odd, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert "wd\\xff: the name is not valid UTF-8" in err and "\n" not in err
    assert not (tmp_path / "out").exists()
