"""Studies 1–4, 10 and 11 end to end with the scripted backbone and the real
SQL checker (tests/test_pipeline.py's people benchmark), each asserting what would fail if its
variant were ignored."""
import importlib.util
import json
import pathlib

import pytest

from countermem_jax.phases.config_validation import ConfigError
from countermem_jax.method.memory import load_frozen
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.studies import SCHEMA, runner
from test_pipeline import MANIFEST, people_benchmark, scripted  # noqa: F401 (fixture)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _study(name, tmp_path, selector="always_top1", arg="cpu", **base):
    spec = importlib.util.spec_from_file_location(name, ROOT / "configs" / "studies" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    study = module.get_config(arg)
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    c = study.base
    c.splits.manifest = str(tmp_path / "manifest.json")
    c.backbone.cache_dir = ""
    c.agent.max_attempts = 2
    c.memory.top_k = 1
    c.selector.update(total_decisions=4, learning_starts=1, train_every=1, target_sync_every=2,
                      checkpoint_every=2, batch_size=2, seeds=(0,))
    c.construction.update(scope_free_text_conditions=False, reuse_policy="always_skip",
                          verification_budget=4)
    c.eval.selector = selector
    for dotted, value in base.items():
        section, field = dotted.split("__")
        c[section][field] = value
    return study


class _Backbones:
    """A fresh scripted backbone per phase, all kept to inspect the prompts they were sent."""

    def __init__(self):
        self.made = []

    def __call__(self):
        self.made.append(scripted())
        return self.made[-1]

    def prompts(self, purpose):
        return [m[-1]["content"] for fake in self.made for c, m in fake.calls
                if c.purpose == purpose]


def _run(study, tmp_path, people_benchmark):
    backbones = _Backbones()
    summary = runner.run_study(study, tmp_path / "study", backbone_factory=backbones,
                               benchmark=people_benchmark)
    assert json.loads((tmp_path / "study" / "study.json").read_text())["schema"] == SCHEMA
    return summary, backbones


def _decisions(summary, variant):
    wd = pathlib.Path(summary["variants"][variant]["workdir"])
    return [d for log in (wd / "eval").glob("countermem-*/log.jsonl")
            for d in RunLog(log).events("decision")]


def test_components(tmp_path, people_benchmark):
    summary, _ = _run(_study("components", tmp_path, selector="dqn"), tmp_path, people_benchmark)
    v = summary["variants"]
    root = tmp_path / "study"
    # CF without WM: records stored with no check before storage, marked unchecked
    cf = load_frozen(root / "cf_without_wm" / "store_frozen.jsonl")
    assert len(cf) >= 1 and not any(r.evidence.improved.completed for r in cf.records)
    ends = [e for e in RunLog(root / "cf_without_wm" / "log.jsonl").events("task_end")
            if e["phase"] == "construction"]
    assert ends and sum(e["cf_checks"] for e in ends) == 0
    full_ends = [e for e in RunLog(root / "full" / "log.jsonl").events("task_end")
                 if e["phase"] == "construction"]
    assert sum(e["cf_checks"] for e in full_ends) > 0
    assert all(r.evidence.improved.completed
               for r in load_frozen(root / "full" / "store_frozen.jsonl").records)
    # WM without CF: checks in the current task, nothing stored, yet e1 is solved within the task
    assert v["wm_without_cf"]["store"]["records"] == 0
    assert not [e for e in RunLog(root / "wm_without_cf" / "log.jsonl").events("task_end")
                if e["phase"] == "construction"]  # nothing to build: no construction task runs
    wm = _decisions(summary, "wm_without_cf")
    assert any(d["memory"].get("within_task_correction") for d in wm)
    assert v["wm_without_cf"]["per_task"]["fixed"]["e1"] == 1 and \
        v["wm_without_cf"]["per_task"]["base"]["e1"] == 0
    assert v["wm_without_cf"]["metrics"]["world_model_calls"] > \
        v["wm_without_cf"]["base_metrics"]["world_model_calls"]
    assert v["wm_without_cf"]["score_vs_base"]["mean"] > 0
    # the evaluation's reference groups are kept, and the summaries drew them
    assert set(v["full"]["task_groups"]) == set(v["full"]["per_task"]["base"])
    assert v["full"]["score"]["groups"] == len(set(v["full"]["task_groups"].values()))
    # the memory-free base run was made once and copied
    assert sum(x["shared_from"]["base_run"] is None for x in v.values()) == 1


def test_retrieval_interventions(tmp_path, people_benchmark):
    summary, _ = _run(_study("retrieval", tmp_path), tmp_path, people_benchmark)
    v = summary["variants"]
    assert summary["reference"] == "none"
    assert v["matched"]["store"]["records"] == 2  # b1 and b2 each stored their correction
    # one build shared by all four
    assert sum(x["shared_from"]["build"] is None for x in v.values()) == 1
    assert len({x["store"]["hash"] for x in v.values()}) == 1
    none = _decisions(summary, "none")
    assert none and all(d["memory"]["retrieved"] == [] for d in none)
    assert v["none"]["metrics"]["selected_uses"] == 0
    matched = {(d["task_id"], d["decision"]): d["memory"]["retrieved"][0]["record_id"]
               for d in _decisions(summary, "matched") if d["memory"]["retrieved"]}
    shuffled = {(d["task_id"], d["decision"]): d["memory"]["retrieved"][0]["record_id"]
                for d in _decisions(summary, "shuffled") if d["memory"]["retrieved"]}
    common = set(matched) & set(shuffled)
    assert common and all(matched[k] != shuffled[k] for k in common)
    assert v["matched"]["metrics"]["retrieved_records"] > 0
    assert v["matched"]["metrics"]["action_changes_per_retrieved"] > 0
    records = {r.record_id: r.source_task_id for r in
               load_frozen(tmp_path / "study" / "matched" / "store_frozen.jsonl").records}
    for name in v:  # no own-task record under any intervention
        for d in _decisions(summary, name):
            assert all(records[r["record_id"]] != d["task_id"] for r in d["memory"]["retrieved"])


def test_condition_removal(tmp_path, people_benchmark):
    # the model revises (memory.revision=llm), so the rendering site of c is exercised too
    summary, backbones = _run(_study("condition_removal", tmp_path, memory__revision="llm"),
                              tmp_path, people_benchmark)
    v = summary["variants"]
    assert v["with_condition"]["by_task_kind"]["look_alike"]["n_tasks"] == 1  # e2: strict bound
    with_c, without_c = (v[n]["by_task_kind"]["look_alike"] for n in ("with_condition",
                                                                       "without_condition"))
    assert with_c.get("selected_uses", 0) == 0 and without_c["selected_uses"] >= 1
    # the paper's label is neutral on these first-attempt uses; the paired draft shows the harm
    assert without_c["harmful_vs_draft_rate"] == 1.0
    assert v["without_condition"]["per_task"]["fixed"]["e2"] == 0
    assert v["with_condition"]["per_task"]["fixed"]["e2"] == 1
    revisions = backbones.prompts("REVISE_WITH_RECORD")
    assert any("applies only if" in p for p in revisions)
    assert any("applies only if" not in p for p in revisions)


def test_retention_at_binding_capacity(tmp_path, people_benchmark):
    study = _study("retention", tmp_path, memory__capacity=1)
    summary, _ = _run(study, tmp_path, people_benchmark)
    v = summary["variants"]
    assert all(x["store"]["evictions"] >= 1 and x["store"]["records"] == 1 for x in v.values())
    assert all(x["shared_from"]["build"] is None for x in v.values())  # one build per rule
    kept = load_frozen(tmp_path / "study" / "recency" / "store_frozen.jsonl").records[0]
    assert kept.source_task_id == "b2"  # recency keeps the newest


def test_harm_against_the_paired_draft(tmp_path, people_benchmark):
    summary, _ = _run(_study("harm", tmp_path, selector="dqn"), tmp_path, people_benchmark)
    top1 = summary["variants"]["always_top1"]["metrics"]
    assert top1["draft_paired_uses"] >= 1
    assert top1["draft_paired_uses"] + top1["draft_unpaired_uses"] == top1["selected_uses"]
    assert top1["helpful_vs_draft"] >= 1  # e1: the record turned a failing draft into a success


def test_learned_vs_fixed_selectors(tmp_path, people_benchmark):
    summary, _ = _run(_study("selectors", tmp_path, selector="dqn"), tmp_path, people_benchmark)
    v = summary["variants"]
    assert v["always_skip"]["metrics"]["selected_uses"] == 0
    assert v["always_top1"]["metrics"]["selected_uses"] >= 1
    assert v["dqn"]["seeds"] == ["0"] and v["always_top1"]["seeds"] == ["fixed"]
    assert len({x["store"]["hash"] for x in v.values()}) == 1
    assert v["always_top1"]["score_vs_base"]["mean"] > v["always_skip"]["score_vs_base"]["mean"]


def test_bad_override_is_refused_before_anything_runs(tmp_path):
    study = _study("retrieval", tmp_path)
    study.variants.none.overrides["eval"]["retrieval_interventio"] = "none"
    with pytest.raises(ConfigError, match="retrieval_interventio"):
        runner.run_study(study, tmp_path / "study")
    assert not (tmp_path / "study").exists()


def test_resumed_study_runs_nothing_again(tmp_path, people_benchmark):
    study = _study("selectors", tmp_path)
    first, _ = _run(study, tmp_path, people_benchmark)
    again, backbones = _run(study, tmp_path, people_benchmark)
    assert sum(len(fake.calls) for fake in backbones.made) == 0
    assert again["variants"]["always_top1"]["score"] == first["variants"]["always_top1"]["score"]


def test_draft_paired_harm_pairs_only_identical_histories():
    from countermem_jax.protocol import metrics

    def decision(task, k, action, success, draft=None, record=None):
        return {"task_id": task, "decision": k, "action": action, "draft": draft or action,
                "outcome": {"success": success, "utility": float(success)},
                "memory": {"record_id": record, "retrieved": []}}
    base = [decision("a", 0, "x", True), decision("b", 0, "y", False), decision("c", 0, "z", False),
            decision("c", 1, "z2", True)]
    used = [decision("a", 0, "x'", False, draft="x", record="r"),    # broke a solved draft
            decision("b", 0, "y'", True, draft="y", record="r"),     # rescued
            decision("c", 1, "w'", False, draft="w", record="r")]    # history diverged
    out = metrics.draft_paired_harm(base, used)
    assert out == {"draft_paired_uses": 2, "draft_unpaired_uses": 1, "harmful_vs_draft": 1,
                   "helpful_vs_draft": 1, "harmful_vs_draft_rate": 0.5}


def test_study_binary_refuses_bad_input_in_one_line(tmp_path):
    import subprocess
    import sys
    for override, expected in [("--config.base.memory.retention=bogus", "memory.retention"),
                               ("--config.base.splits." + "n_evall=3", "n_evall")]:
        out = subprocess.run(
            [sys.executable, "-m", "countermem_jax.study",
             "--config=configs/studies/retrieval.py:cpu", f"--workdir={tmp_path / 'study'}",
             "--config.base.backbone.model_path=/nonexistent.gguf", override],
            capture_output=True, text=True, timeout=300, cwd=ROOT)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 1 and len(lines) == 1 and expected in lines[0], out.stderr
        assert lines[0].startswith("error:") and not (tmp_path / "study").exists()
