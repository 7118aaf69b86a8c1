"""A new user's first hour: the README's two commands, set-up and run in an order that works (a
virtual environment, the install, then the data command that needs it), the quickstart's time with the
load it was measured under, a construction bar that shows work from the first model call, the
notebook opening the quickstart's workdir from where Jupyter starts it, the README pointing to
the notebook and ``load_selector``, and the ``curves`` extra installing what reads the curves."""
import ast
import json
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _quickstart_block() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1]
    return section.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()


def test_the_readmes_quickstart_is_two_commands_set_up_and_run_then_the_tests():
    commands = [line.split("#")[0].strip() for line in _quickstart_block()]
    assert commands == ["bash launch/quickstart_cpu.sh", "bash launch/test.sh"]


def test_the_quickstart_makes_a_venv_and_installs_before_the_data_command_and_the_run():
    setup = (ROOT / "launch" / "setup.sh").read_text(encoding="utf-8")
    assert setup.index("python3 -m venv .venv") < setup.index(". .venv/bin/activate") \
        < setup.index("bash launch/install.sh")
    script = (ROOT / "launch" / "quickstart_cpu.sh").read_text(encoding="utf-8")
    assert script.index("bash launch/setup.sh") < script.index(". .venv/bin/activate") \
        < script.index("-m countermem_jax.data fetch spider") \
        < script.index("-m countermem_jax.build_memory")


def test_the_readme_states_the_quickstarts_time_with_its_load():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    time_item = readme.split("- **Time**", 1)[1].split("\n- ", 1)[0]
    assert "load average" in time_item and "826 s" in time_item and "30 min" in time_item
    assert "calls=" in time_item   # what moves on the bar before a task is finished


def test_the_readme_points_to_the_notebook_and_load_selector():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/analysis.ipynb)" in readme and "runs/spider_cpu" in readme
    assert "countermem_jax.protocol.analysis.load_selector" in readme
    from countermem_jax.protocol import analysis
    assert callable(analysis.load_selector)


def test_the_curves_extra_installs_tensorboard():
    tree = ast.parse((ROOT / "setup.py").read_text())
    extras = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") ==
                  "_EXTRAS")
    assert any(re.match(r"tensorboard\b(?!X)", dep) for dep in extras["curves"])


def _notebook_workdir_lines() -> str:
    nb = json.loads((ROOT / "docs" / "analysis.ipynb").read_text(encoding="utf-8"))
    code = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    return "import os\nimport pathlib\n" + code.split("store = load_frozen", 1)[0].split(
        "from countermem_jax.runtime.runlog import RunLog\n", 1)[1]


@pytest.mark.parametrize("cwd", ["", "docs"])
def test_the_notebook_opens_the_quickstarts_workdir(tmp_path, monkeypatch, cwd):
    script = (ROOT / "launch" / "quickstart_cpu.sh").read_text()
    default = re.search(r'WORKDIR="\$\{1:-([^}]+)\}"', script).group(1)
    (tmp_path / default).mkdir(parents=True)
    (tmp_path / default / "store_frozen.jsonl").write_text("")
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path / cwd)
    monkeypatch.delenv("COUNTERMEM_WORKDIR", raising=False)
    scope = {}
    exec(_notebook_workdir_lines(), scope)   # noqa: S102 -- the notebook's own cell
    assert scope["WORKDIR"].resolve() == (tmp_path / default).resolve()


def test_the_construction_bar_shows_calls_before_the_first_task_ends(tmp_path, capsys,
                                                                      people_benchmark):
    from countermem_jax import experiment
    from test_pipeline import _config, scripted
    cfg = _config(tmp_path)
    experiment.build_memory(cfg, tmp_path / "wd", backbone=scripted(), benchmark=people_benchmark)
    bar = capsys.readouterr().err
    total = re.search(r"build memory: +\d+%\|[^|]*\| 0/(\d+)", bar)
    assert total, bar[-500:]
    assert re.search(rf"\| 0/{total.group(1)} \[[^\]]*calls=[1-9]", bar), bar[-500:]


from test_pipeline import people_benchmark  # noqa: E402,F401  (fixture)
