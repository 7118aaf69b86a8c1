"""The benchmark registry: the twelve settings of Appendix D.1 with their decision
units, configs for both agents on both backbones, tasks that load where the data is present."""
import importlib.util
import os
import pathlib

import pytest

from countermem_jax import domains
from countermem_jax.domains import registry
from helpers import paper_config

CONFIGS = pathlib.Path(__file__).parent.parent / "configs"

# Appendix D.1, Table "Evaluation suite": benchmark -> (domain, decision unit).
PAPER = {
    "minif2f": ("Math", "tactic / proof step"), "proofnet": ("Math", "proof continuation"),
    "amber": ("Math", "tactic / lemma choice"), "swebench": ("Coding", "edit / patch"),
    "bugsinpy": ("Coding", "localized edit"), "dafnybench": ("Formal", "invariant / annotation"),
    "vericoding_dafny": ("Formal", "code step"), "vericoding_verus": ("Formal", "proof / code step"),
    "spider": ("Text-to-SQL", "join / predicate"), "bird": ("Text-to-SQL", "schema / join"),
    "smtlib": ("SMT", "encoding / solver action"), "satlib": ("SAT", "branching / encoding"),
}


def _module(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_twelve_settings_and_their_decision_units():
    got = {b.name: (b.paper_domain, b.decision_unit) for b in domains.paper_settings()}
    assert got == PAPER
    # the package's own entries (tests may register more, as the sweep tests do)
    assert {b.name for b in registry._ENTRIES if b.extra} == {
        "quixbugs", "sat_encoding", "smt_encoding"}


def test_unknown_benchmark_lists_the_registered_ones():
    cfg = paper_config("spider,react,gptoss").data
    cfg.benchmark = "spidr"
    with pytest.raises(ValueError, match="unknown benchmark 'spidr'; registered: amber, bird"):
        domains.load_benchmark(cfg)


@pytest.mark.parametrize("name", sorted(PAPER))
@pytest.mark.parametrize("agent", ["react", "reflexion"])
@pytest.mark.parametrize("backbone", ["gptoss", "api"])
def test_every_setting_is_an_argument_of_the_documented_paper_config(name, agent, backbone):
    module = _module(CONFIGS / "paper.py")
    cfg = module.get_config(f"{name},{agent},{backbone}")
    assert (cfg.data.benchmark, cfg.agent.kind) == (name, agent)
    doc = " ".join(module.__doc__.split())
    assert "python -m countermem_jax.data fetch" in doc and domains.get(name).data in doc
    assert name in doc and "prints" in doc
    if backbone == "api":
        assert cfg.backbone.api_key_env == "GEMINI_API_KEY" and "never from a file" in doc


@pytest.mark.parametrize("name", sorted(PAPER))
def test_each_setting_loads_its_tasks_where_the_data_is_present(name):
    cfg = _module(CONFIGS / "paper.py").get_config(f"{name},react,gptoss")
    try:
        tasks = domains.get(name).tasks(cfg.data)
    except domains.MissingData as err:
        pytest.skip(str(err))
    assert tasks, name
    unit = domains.get(name).decision_unit
    assert {t.decision_unit for t in tasks} <= {unit, *unit.split(" / ")}
    assert {t.benchmark for t in tasks} <= {name, name.replace("_", "-")}
    n = sum(cfg.splits[k] for k in ("n_build", "n_train", "n_validation", "n_eval"))
    if name not in ("amber", "bird", "bugsinpy", "swebench"):   # (not in the shared copy)
        assert n <= len(tasks), f"{name}: splits need {n} tasks, the data has {len(tasks)}"


def test_calibrated_solver_settings_restrict_budgets(benchdata):
    sat = domains.get("satlib").tasks(paper_config("satlib,react,gptoss").data)
    assert {t.features["family"] for t in sat} == {"uf50-218", "uuf50-218", "flat30-60"}
    assert {t.reference.max_conflicts for t in sat} == {45}
    smt = domains.get("smtlib").tasks(paper_config("smtlib,react,gptoss").data)
    assert {t.reference.max_rlimit for t in smt} == {2000}


def test_missing_data_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("COUNTERMEM_DATA", str(tmp_path))
    with pytest.raises(domains.MissingData, match="python -m countermem_jax.data fetch spider"):
        domains.get("spider").tasks(paper_config("spider,react,gptoss").data)


def test_api_backbone_reads_its_key_from_the_named_variable(monkeypatch):
    from countermem_jax.backbones.factory import make_backbone
    cfg = paper_config("spider,react,api").backbone
    cfg.cache_dir = ""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="GEMINI_API_KEY, which is not set"):
        make_backbone(cfg)
    monkeypatch.setenv("GEMINI_API_KEY", "k-test")
    assert make_backbone(cfg).api_key == "k-test"


def test_load_benchmark_keeps_its_interface(benchdata):
    cfg = paper_config("spider,react,gptoss").data
    cfg.db_ids = ("concert_singer",)
    tasks, evaluator, domain = domains.load_benchmark(cfg)
    assert domain is domains.SQL and tasks and evaluator.name


def test_a_phase_without_data_says_how_to_get_it_in_one_line(tmp_path):
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, COUNTERMEM_DATA=str(tmp_path / "empty"), PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-m", "countermem_jax.build_memory",
                          "--config=configs/spider_react_cpu.py", f"--workdir={tmp_path / 'w'}"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: spider:")
    assert "python -m countermem_jax.data fetch spider" in out.stderr
