"""docs/analysis.ipynb runs top to bottom on a small scripted workdir (store, two DQN seeds):
a notebook that no longer runs fails here."""
import os

import pytest

from countermem_jax import experiment
from test_pipeline import _config, people_benchmark, scripted  # noqa: F401 (fixture)

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "docs", "analysis.ipynb")


def test_analysis_notebook_runs_on_a_scripted_workdir(tmp_path, people_benchmark, monkeypatch):
    cfg = _config(tmp_path, selector="dqn")
    for phase in (experiment.build_memory, experiment.train_selector):
        phase(cfg, tmp_path / "wd", backbone=scripted(), benchmark=people_benchmark)
    monkeypatch.setenv("COUNTERMEM_WORKDIR", str(tmp_path / "wd"))
    # the kernel imports this checkout's package, whatever its working directory
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [os.path.abspath(os.path.join(os.path.dirname(__file__), "..")),
         os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "DQN selector seed 0" in printed and "DQN selector seed 1" in printed
    figures = [o for c in nb.cells for o in c.get("outputs", [])
               if "image/png" in o.get("data", {})]
    assert len(figures) == 3   # Q-values, record statistics, learning curves
