"""§6 over Table 1's four domains and both agents in one command (``studies.grid``), Fig. 4 from
the study directory (``reporting.domain_studies``): the scripted backbone and the real SQL
checker stand in for every benchmark; one domain's checker is made absent."""
import functools
import json
import os
import pathlib
import tempfile

import pytest

from countermem_jax import report
from countermem_jax.reporting import domain_studies
from countermem_jax.studies import grid
from evaluators.formal.tools import ToolMissing
from test_pipeline import people_benchmark, scripted  # noqa: F401 (fixture)
from test_studies import _study

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ("minif2f", "swebench", "spider", "satlib")   # one per domain, Math first


def _config(name, tmp_path):
    """The study's four-domain CPU config at test size, one benchmark per domain."""
    study = _study(name, tmp_path, arg="four_domains,cpu")
    study.grid.benchmarks = BENCHMARKS
    return study


def _scripted():
    """The pipeline test's scripted backbone, with a reflection for Reflexion."""
    fake = scripted()
    fake.add("REFLECTION: 'at least' includes the boundary", template="REFLEXION_REFLECT")
    return fake


def _people(root, data_cfg):
    """The pipeline test's people benchmark in a new directory under ``root`` (for Ray)."""
    import helpers
    from test_pipeline import QUESTIONS
    pathlib.Path(root).mkdir(parents=True, exist_ok=True)
    path = pathlib.Path(tempfile.mkdtemp(prefix=data_cfg.benchmark, dir=root))  # one per load
    return helpers.people_benchmark(path, {t: (q, g) for t, (q, g, _) in QUESTIONS.items()})


def _loader(people_benchmark, absent=()):
    def load(data_cfg):
        if data_cfg.benchmark in absent:
            raise ToolMissing("'lake' not found on PATH: install Lean 4")
        return people_benchmark
    return load


@pytest.mark.parametrize("name, absent", [("components", ("minif2f",)), ("retrieval", ())])
def test_four_domain_study_runs_and_reports_fig4(name, absent, tmp_path, people_benchmark,
                                                 capsys):
    study = _config(name, tmp_path)
    record = grid.run_grid(study, tmp_path / "study", backbone_factory=_scripted,
                           load=_loader(people_benchmark, absent))
    ran = [s for s in record["settings"] if s["status"] == "ran"]
    assert len(ran) == 2 * (4 - len(absent))
    assert {s["agent"] for s in ran} == {"react", "reflexion"}
    printed = capsys.readouterr().out
    out = tmp_path / "report"
    assert report.main([str(tmp_path / "study"), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    est = domain_studies.estimates(dict(record, _dir=str(tmp_path / "study")))
    four = [r for r in est if r["scope"] == "four-domain"]
    assert {r["panel"] for r in four} == ({"a", "b"} if name == "components" else {"c", "d"})
    assert (out / f"study_{name}.png").stat().st_size > 0
    if absent:
        # Math's checker is absent: no four-domain value, the reason in the table and the figure
        assert all(r["mean"] is None and "Math not run: Lean absent" in r["status"] for r in four)
        assert "Math not run: Lean absent" in printed and "Math not run: Lean absent" in md
        assert "none (Math not run)" in printed   # the four-domain cell keeps its column
        coding = [r for r in est if r["scope"] == "Coding" and r["metric"] == "gain"]
        assert coding and all(r["mean"] is not None for r in coding)
    else:
        gains = {(r["agent"], r["variant"]): r for r in four if r["metric"] == "gain"}
        # none retrieves nothing: its gain over the base agent is exactly zero
        assert gains[("react", "none")]["mean"] == 0.0
        assert gains[("react", "matched")]["mean"] > 0
        assert gains[("react", "none")]["diff_vs_full"] < 0
        assert gains[("react", "none")]["p_vs_full"] is not None
        per_retrieved = [r for r in four if r["metric"] == "changes_per_retrieved"
                         and r["variant"] == "matched"]
        assert all(r["mean"] > 0 for r in per_retrieved)
        assert "vs full" in printed


def _sub(gains, n=2):
    """A setting's study.json with one seed whose per-task gain over the base is ``gains``."""
    tasks = [f"t{i}" for i in range(n)]
    base = {t: [1, 0, 0, 0, 0] for t in tasks}
    mem = {t: [1, int(i < round(gains * n / 100)), 0, 0, 0] for i, t in enumerate(tasks)}
    return {"eval_task_ids": tasks,
            "variants": {"full": {"per_task_counts": {"base": base, "0": mem}}}}


def test_domain_weighting_matches_a_hand_computed_example():
    # Math: two benchmarks, gains 50 and 100 -> 75; Coding 0; Text-to-SQL 100; SAT 50.
    # Equal domain weight: (75 + 0 + 100 + 50) / 4 = 56.25 (equal benchmark weight would be 60).
    gains = {"minif2f": 50, "proofnet": 100, "swebench": 0, "spider": 100, "satlib": 50}
    domain = {"minif2f": "Math", "proofnet": "Math", "swebench": "Coding",
              "spider": "Text-to-SQL", "satlib": "SAT"}
    record = {"study": "components", "domains": ["Math", "Coding", "Text-to-SQL", "SAT"],
              "agents": ["react"], "full": "full", "variants": {"full": "full"},
              "panels": [{"panel": "a", "title": "gain", "stats": ["gain"], "unit": "pp"}],
              "settings": [{"benchmark": b, "agent": "react", "status": "ran", "domain": d,
                            "dir": b} for b, d in domain.items()]}
    subs = {(b, "react"): _sub(g) for b, g in gains.items()}
    rows = {r["scope"]: r for r in domain_studies.estimates(record, subs)}
    assert rows["four-domain"]["mean"] == pytest.approx(56.25)
    assert rows["Math"]["mean"] == pytest.approx(75.0)
    lo, hi = rows["four-domain"]["ci95_low"], rows["four-domain"]["ci95_high"]
    assert lo <= 56.25 <= hi and hi - lo > 0
    # a domain with nothing run: no four-domain mean over the other three
    # (the cell gives the short reason; the loader's details stay in the settings line)
    record["settings"][2]["status"] = ("not run: data absent (swebench: needs one prepared "
                                       "checkout per instance; `python -m countermem_jax.d")
    del subs[("swebench", "react")]
    rows = {r["scope"]: r for r in domain_studies.estimates(record, subs)}
    assert rows["four-domain"]["mean"] is None
    assert rows["four-domain"]["status"] == "Coding not run: data absent"
    assert rows["Math"]["mean"] == pytest.approx(75.0)


def test_absent_checker_is_a_status_not_an_error():
    from ml_collections import ConfigDict
    triple, status = grid.availability(ConfigDict({"benchmark": "minif2f"}),
                                       _loader(None, absent=("minif2f",)))
    assert triple is None and status == "not run: Lean absent"


def test_absent_data_is_a_status_with_what_is_missing():
    from ml_collections import ConfigDict
    from countermem_jax.domains.base import MissingData

    def load(data_cfg):
        raise MissingData("amber: AMBER tasks (amber.jsonl) not found at /data/amber.jsonl; "
                          "get it with `python -m countermem_jax.data fetch amber`")
    triple, status = grid.availability(ConfigDict({"benchmark": "amber"}), load)
    assert triple is None
    assert status == ("not run: data absent "
                      "(amber: AMBER tasks (amber.jsonl) not found at /data/amber.jsonl)")


def test_backbone_summary_from_main_table_workdirs(tmp_path):
    from test_report import _ids, _outcomes, _workdir
    from countermem_jax.reporting import backbone_summary, load
    dirs = []
    # gpt-oss: base 0% everywhere, CounterMem 50% on Math/Coding/SAT and 100% on Text-to-SQL
    # -> four-domain 0 -> 62.5; the other backbone lacks Math.
    for model, benches in (("gpt-oss-120b", ("minif2f", "swebench", "spider", "satlib")),
                           ("other", ("swebench", "spider", "satlib"))):
        for bench in benches:
            ids = _ids(4, bench[:2])
            solved = [1] * 4 if bench == "spider" else [1, 1, 0, 0]
            wd = _workdir(tmp_path / model / bench, "countermem",
                          {"base": _outcomes(ids, [0] * 4),
                           "countermem-dqn-seed0": ("0", _outcomes(ids, solved))}, ids,
                          seeds=["0"], benchmark=bench)
            fp = json.loads((wd / "fingerprint.json").read_text())
            fp["build_memory"]["fields"]["backbone.model"] = model
            (wd / "fingerprint.json").write_text(json.dumps(fp))
            dirs.append(wd)
    arms, _ = load.load_all(dirs)
    rows = {r["backbone"]: r for r in backbone_summary.rows(arms)}
    full = next(r for b, r in rows.items() if "gpt-oss" in b)
    assert full["base_score"] == 0.0 and full["countermem_score"] == pytest.approx(62.5)
    assert full["gain"] == pytest.approx(62.5) and full["base_tokens_m"] > 0
    partial = next(r for b, r in rows.items() if "other" in b)
    assert partial["gain"] is None and partial["status"] == "no four-domain score: Math not run"
    out = tmp_path / "report"
    assert report.main([str(d) for d in dirs] + ["--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "Backbone summary" in md and "not a confidence interval" in md
    assert (out / "backbone_summary.png").stat().st_size > 0


def test_four_domain_study_on_ray_gives_the_local_artefacts(tmp_path, people_benchmark):
    ray = pytest.importorskip("ray")
    study = _config("retrieval", tmp_path)
    study.grid.update(benchmarks=("spider", "satlib"), agents=("react",))
    local = grid.run_grid(study, tmp_path / "local", backbone_factory=_scripted,
                          load=_loader(people_benchmark))
    study.grid.executor = "ray"   # each worker makes the same SQLite benchmark of its own
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"),
                                                os.environ.get("PYTHONPATH", "")])
    try:
        remote = grid.run_grid(study, tmp_path / "ray", backbone_factory=_scripted,
                               load=functools.partial(_people, str(tmp_path / "ray_data")))
    finally:
        ray.shutdown()
    assert [s["status"] for s in remote["settings"]] == ["ran", "ran"]
    for s in local["settings"]:
        a, b = (json.loads((tmp_path / d / s["dir"] / "study.json").read_text())["variants"]
                for d in ("local", "ray"))
        assert {v: x["per_task"] for v, x in a.items()} == {v: x["per_task"] for v, x in b.items()}
        # the same stores, record for record: the build hash leaves out only each build's
        # creation times and random store id (the integrity hash covers them, so it differs)
        assert {v: x["store"]["build_hash"] for v, x in a.items()} == \
            {v: x["store"]["build_hash"] for v, x in b.items()}
        assert all(x["store"]["records"] > 0 for x in a.values())   # not two empty stores
