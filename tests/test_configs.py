"""The shipped configs: ``configs/default.py`` (every field with the paper's value),
``configs/paper.py:<benchmark>,<agent>,<backbone>[,<variant>]`` for every paper setting, and the
CPU quickstart's own file; each loads, validates and documents its
commands; a bad argument is refused in one line naming the valid choices."""
import importlib.util
import pathlib
import subprocess
import sys

import pytest

from countermem_jax.phases import config_validation
from countermem_jax import domains

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _module(name: str):
    path = ROOT / "configs" / name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAPER = _module("paper.py")
BENCHMARKS = sorted({**PAPER.SETTINGS, **PAPER.EXTRA_SETTINGS})


def test_the_config_folder_holds_the_defaults_one_paper_config_and_the_quickstart():
    assert sorted(p.name for p in (ROOT / "configs").glob("*.py")) == [
        "default.py", "paper.py", "spider_react_cpu.py"]


def test_the_paper_and_cpu_configs_only_override_fields_of_the_defaults():
    """Every field of a paper or CPU config is declared by ``configs/default.py``."""
    from flax import traverse_util
    fields = set(traverse_util.flatten_dict(_module("default.py").get_config().to_dict()))
    for cfg in (PAPER.get_config(), PAPER.get_config("satlib,reflexion,api"),
                _module("spider_react_cpu.py").get_config()):
        assert set(traverse_util.flatten_dict(cfg.to_dict())) == fields


@pytest.mark.parametrize("name", BENCHMARKS)
@pytest.mark.parametrize("agent", ["react", "reflexion"])
@pytest.mark.parametrize("backbone", ["gptoss", "api"])
def test_every_setting_loads_and_is_valid(name, agent, backbone):
    cfg = _module("paper.py").get_config(f"{name},{agent},{backbone}")
    config_validation.validate(cfg)
    assert (cfg.data.benchmark, cfg.agent.kind) == (name, agent)
    assert cfg.data.benchmark in domains.BENCHMARKS
    assert cfg.backbone.kind == "openai"
    if backbone == "gptoss":
        assert cfg.backbone.model == "openai/gpt-oss-120b"
    else:
        assert cfg.backbone.api_key_env == "GEMINI_API_KEY"


def test_paper_settings_keep_their_sizes_and_data_fields():
    paper = _module("paper.py").get_config
    assert paper("satlib,react,gptoss").data.max_conflicts == 45
    assert paper("sat_encoding,react,gptoss").data.generated_per_family == 25
    assert paper("smt_encoding,react,api").splits.n_eval == 20
    assert paper("quixbugs,reflexion,gptoss").splits.n_build == 10
    plain, dbsplit = paper("spider,react,gptoss"), paper("spider,react,gptoss,dbsplit")
    assert not plain.splits.separate_environments and dbsplit.splits.separate_environments
    assert paper().to_dict() == plain.to_dict()


@pytest.mark.parametrize("agent", ["react", "reflexion"])
def test_the_cpu_backbone_is_the_quickstart_schedule(agent):
    cfg = _module("paper.py").get_config(f"spider,{agent},cpu")
    config_validation.validate(cfg)
    assert cfg.backbone.kind == "llama_cpp" and cfg.agent.kind == agent
    if agent == "react":
        assert cfg.to_dict() == _module("spider_react_cpu.py").get_config().to_dict()


def test_configs_document_their_commands():
    doc = " ".join(_module("paper.py").__doc__.split())
    for binary in ("build_memory", "train_selector", "evaluate"):
        assert f"python -m countermem_jax.{binary} --config=configs/paper.py:spider,react,gptoss" \
            in doc
    for example in ("--config.selector.dqn.learning_rate=3e-4", "--config.method=expel",
                    "configs/paper.py:satlib,reflexion,api",
                    "--sweep=configs/sweeps/paper_grid.py"):
        assert example in doc, example
    for name in BENCHMARKS:
        assert name in doc
    for data in {domains.get(name).data for name in PAPER.SETTINGS}:
        assert data in doc, data
    doc = " ".join(_module("spider_react_cpu.py").__doc__.split())
    for binary in ("build_memory", "train_selector", "evaluate"):
        assert f"python -m countermem_jax.{binary} --config=configs/spider_react_cpu.py" in doc


@pytest.mark.parametrize("arg, message", [
    ("spidr,react,gptoss", "unknown benchmark 'spidr'; expected one of: amber, bird,"),
    ("spider,toolformer,gptoss", "unknown agent 'toolformer'; expected one of: react, reflexion"),
    ("spider,react,gpt5", "unknown backbone 'gpt5'; expected one of: gptoss, api, cpu"),
    ("spider,react,gptoss,big", "unknown variant 'big'; expected one of: dbsplit"),
    ("spider,react", "give benchmark,agent,backbone[,variant]"),
    ("bird,react,cpu", "the cpu backbone runs Spider only"),
])
def test_a_bad_argument_is_refused_in_one_line_naming_the_choices(tmp_path, arg, message):
    workdir = tmp_path / "wd"
    out = subprocess.run(
        [sys.executable, "-m", "countermem_jax.build_memory",
         f"--config=configs/paper.py:{arg}", f"--workdir={workdir}"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: configs/paper.py:{arg}: ") and message in lines[0]
    assert not workdir.exists()


def test_gpu_configs_keep_every_phase_full_and_cpu_configs_one_at_a_time():
    """Construction on the gpt-oss and API settings keeps as many tasks in flight as the
    servers hold (0, resolved at phase start); the gpt-oss selector waves' five seeds together
    hold the paper host's sequences; the CPU schedule keeps 1 everywhere."""
    paper = _module("paper.py").get_config
    gptoss, api, cpu = (paper(f"spider,react,{b}") for b in ("gptoss", "api", "cpu"))
    assert gptoss.construction.wave_size == api.construction.wave_size == 0
    assert gptoss.selector.wave_size * len(gptoss.selector.seeds) <= PAPER.VLLM_SEQUENCES
    assert gptoss.selector.wave_size == PAPER.VLLM_SEQUENCES // 5 > 1
    assert api.selector.wave_size == 1
    assert (cpu.construction.wave_size, cpu.selector.wave_size, cpu.eval.concurrency) == (1, 1, 1)
