"""Uses that changed their draft (protocol/metrics.py): a count under the LLM revision, and
labelled, not printed as a finding, where the replay makes it every use by construction."""
import re

import helpers
import pytest

from countermem_jax import experiment
from countermem_jax.studies import replication
from benchmarks.testing.scripted_backbone import Rule
from test_pipeline import QUESTIONS, _config, scripted

BY_CONSTRUCTION = "every use, by construction under replay"


@pytest.fixture
def people(tmp_path):
    return helpers.people_benchmark(tmp_path, {t: (q, g) for t, (q, g, _) in QUESTIONS.items()})


def _keep_draft(messages):
    draft = re.search(r"Your draft action:\n```\n(.*?)\n```", messages[-1]["content"], re.S).group(1)
    return "```sql\n" + draft + "\n```"


def _row(out: str, label: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(label))


def test_an_llm_revision_that_keeps_the_draft_is_not_counted_as_changed(tmp_path, people, capsys):
    # e1's first revision returns the draft as it was; its second makes the fix.
    fake = scripted()
    fake.rules.insert(0, Rule(_keep_draft, template="REVISE_WITH_RECORD", task="/e1#0"))
    cfg = _config(tmp_path)
    assert cfg.memory.revision == "llm"
    experiment.build_memory(cfg, tmp_path / "wd", backbone=fake, benchmark=people)
    capsys.readouterr()
    result = experiment.evaluate(cfg, tmp_path / "wd", backbone=fake, benchmark=people)
    m = result["aggregate"]["mean"]
    assert (m["selected_uses"], m["uses_changed_draft"], m["uses_changed_right"]) == (2, 1, 1)
    out = capsys.readouterr().out
    assert _row(out, "  that changed the draft").split()[-1] == "1"
    assert BY_CONSTRUCTION not in out


def test_under_replay_the_changed_count_is_labelled_by_construction(tmp_path, people, capsys):
    cfg = _config(tmp_path)
    cfg.memory.revision = "replay"
    fake = scripted()
    experiment.build_memory(cfg, tmp_path / "wd", backbone=fake, benchmark=people)
    capsys.readouterr()
    result = experiment.evaluate(cfg, tmp_path / "wd", backbone=fake, benchmark=people)
    m = result["aggregate"]["mean"]
    assert m["selected_uses"] == m["uses_changed_draft"] > 0 and result["revision"] == "replay"
    assert _row(capsys.readouterr().out, "  that changed the draft").endswith(
        f"{BY_CONSTRUCTION} (no finding)")


def _pooled(by_construction: bool) -> dict:
    row = {"label": "ReAct+CounterMem (top-1)", "seeds": [0], "tasks": 4, "groups": 4,
           "score": {"mean": 50.0, "ci95": [0.0, 100.0]},
           "difference": {"mean": 25.0, "ci95": [0.0, 50.0]}, "sign_test_p": 1.0,
           "rescued": 1, "broken": 0, "uses": 4, "harmful": 0, "changed": 3,
           "changed_right": 1, "changed_by_construction": by_construction}
    base = {"label": "ReAct", "seeds": [0], "tasks": 4, "groups": 4,
            "score": {"mean": 25.0, "ci95": [0.0, 75.0]}}
    return {"arms": {"react": base, "top1": row}, "per_seed": {}, "method": "bootstrap",
            "provenance": {"databases": ["db"], "report_pool": [], "backbone": "fake",
                           "config": "c", "code_version": "v", "pools_fixed_on": "d",
                           "wall_time_s": 1.0, "seeds": {}}}


def test_the_replications_changed_share_is_a_finding_only_outside_replay():
    llm, replayed = _pooled(False), _pooled(True)
    assert "3/4" in replication.table(llm) and "by constr." not in replication.table(llm)
    table = replication.table(replayed)
    assert "3/4" not in table and "by constr." in table and "not a finding" in table
    assert not any("changed" in m for m in replication.goal(llm["arms"]["top1"]))
    assert any("changed share not measured" in m
               for m in replication.goal(replayed["arms"]["top1"]))
