"""The smoke run of every method (launch/smoke_methods_cpu.sh): its splits manifest,
its summary, and the accounting it checks — every LLM call any phase of any method makes is
booked on a task run, so the task ends' tokens and calls equal the ledgers' totals that the
phases record in their ``phase_end`` events. Scripted backbone, real SQL checker."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from countermem_jax import baselines
from test_baselines import scripted
from test_pipeline import people_benchmark  # noqa: F401  (fixture)
from helpers import cpu_config, default_config

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("smoke_methods", ROOT / "launch/smoke_methods.py")
smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke)


def _three_phases(tmp_path, benchmark, method, manifest=None):
    from countermem_jax import experiment
    from test_pipeline import _config
    cfg = _config(tmp_path)
    cfg.method = method
    cfg.baselines = default_config().baselines
    if manifest:
        path = tmp_path / "manifest.json"
        path.write_text(json.dumps(manifest))
        cfg.splits.manifest = str(path)
    wd = tmp_path / method
    for phase in (experiment.build_memory, experiment.train_selector, experiment.evaluate):
        phase(cfg, wd, backbone=scripted(), benchmark=benchmark)  # a fresh ledger per binary
    return wd


@pytest.mark.parametrize("method", [m for m in baselines.METHODS if m != "countermem"])
def test_every_llm_call_of_every_method_is_booked_on_a_task_run(tmp_path, people_benchmark,
                                                                method):
    wd = _three_phases(tmp_path, people_benchmark, method)
    acc = smoke.accounting(wd)
    assert acc["ledger_calls"] > 0 and acc["task_ends"] > 0
    assert (acc["task_tokens"], acc["task_llm_calls"]) == (acc["ledger_tokens"],
                                                           acc["ledger_calls"]), acc
    row = smoke.method_row(wd, method)
    assert row["all_logged"] and row["eval_tasks"] == len(json.loads(
        (wd / "splits.json").read_text())["eval"])


def test_accounting_sees_an_unbooked_call(tmp_path, people_benchmark):
    wd = _three_phases(tmp_path, people_benchmark, "none")
    log = wd / "log.jsonl"
    events = [json.loads(x) for x in log.read_text().splitlines()]
    end = next(e for e in events if e.get("event") == "phase_end")
    end["ledger"]["calls"]["evaluation"] += 1  # a call that reached the backbone, booked nowhere
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert not smoke.accounting(wd)["all_logged"]


def test_summary_reports_a_method_without_metrics_and_fails(tmp_path, people_benchmark, capsys):
    _three_phases(tmp_path, people_benchmark, "none")
    capsys.readouterr()
    assert smoke.main(["summary", str(tmp_path), "--methods=none,expel"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("none") and "OK" in out[0]
    assert out[1].startswith("expel") and "FAILED" in out[1]
    result = json.loads(out[-1].removeprefix("result: "))
    assert result["ok"] is False and result["methods"]["none"]["all_logged"]


def test_smoke_manifest_keeps_the_splits_apart(tmp_path):
    from countermem_jax import domains
    from countermem_jax.protocol import splits
    try:
        tasks, _, _ = domains.load_benchmark(cpu_config().data)
    except (FileNotFoundError, OSError) as e:
        pytest.skip(f"no Spider data: {e}")
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, str(ROOT / "launch/smoke_methods.py"), "manifest",
                           str(out), f"--config={ROOT / 'configs/spider_react_cpu.py'}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(out.read_text())
    assert {k: len(v) for k, v in manifest.items()} == smoke.SIZES
    sp = splits.from_manifest(tasks, manifest)  # refuses shared ids and reference groups
    assert not {t.task_id for t in sp.eval} & {t.task_id for t in sp.build + sp.train}
    assert manifest == smoke.draw_manifest(tasks)  # the same questions every run


def test_smoke_script_refuses_an_unknown_method_before_any_model(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "launch/smoke_methods_cpu.sh"), str(tmp_path / "r"),
                           "no_such_method"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "no_such_method" in proc.stdout + proc.stderr


@pytest.mark.parametrize("method", ("none", "voyager"))
def test_evaluate_claims_a_verified_memory_only_where_one_exists(tmp_path, people_benchmark,
                                                                 method, capsys):
    """The closing lines name the method's own row (a baseline has no 'fixed selector'), report
    no condition verdicts (it judges none) and say 'frozen memory verified unchanged' only for
    a method that has a frozen memory."""
    _three_phases(tmp_path, people_benchmark, method)
    out = capsys.readouterr().out
    label = "None" if method == "none" else "Voyager"
    assert f"  {label}: score " in out and "fixed selector" not in out
    assert "conditions:" not in out  # no applicability condition was judged in a baseline row
    assert ("frozen memory verified unchanged" in out) == baselines.needs_construction(method)


def test_expel_tail_batch_is_booked_on_the_final_construction_task(tmp_path, people_benchmark):
    """The last, partial success batch (v1, solved at once) is compared within the final
    construction task: its call is in that task's task-run tokens and LLM calls, so the task
    ends add up to the ledger and the cost of building counts it (it used to be charged outside
    any task run)."""
    from test_baselines import BUILD, _build, _cfg
    fake = scripted()
    _build("expel", _cfg(expel={"success_batch": 2}), fake, people_benchmark, tmp_path, BUILD)
    assert BUILD[-1] == "v1"
    updates = [c for c, _ in fake.calls if c.purpose == "EXPEL_UPDATE"]
    assert len(updates) == 3 and updates[-1].decision.startswith("build-expel/v1#")
    events = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    ends = [e for e in events if e["event"] == "task_end"]
    assert sum(e["tokens"] for e in ends) == fake.ledger.total("construction").total
    assert sum(e["llm_calls"] for e in ends) == fake.ledger.calls["construction"]
    assert not [e for e in events if e["event"] == "baseline_memory" and not e["task_id"]]
    assert smoke.accounting(tmp_path)["all_logged"]
