"""The paper's main grid (Table 1): 12 benchmarks x 2 agents x 2 backbones x every method x 5
selector seeds, one command on a Ray cluster of GPU hosts (docs/sweeps.md).

    python -m countermem_jax.sweep --sweep=configs/sweeps/paper_grid.py --dry_run
    python -m countermem_jax.sweep --sweep=configs/sweeps/paper_grid.py \
        --sweep.root=/shared/countermem/paper_grid

The dry run prints one line per phase run (`#i workdir:phase[label] cpus=.. llm_slots=.. after:
#deps`) and the runs per phase: one build per store (CounterMem and each baseline with a memory),
one selector training and one evaluation per seed, one aggregating evaluation per CounterMem
workdir, one evaluation per baseline. The sweep prints a summary line every 60 s
(`[sweep h:mm:ss] runs: N done, N running, N waiting, N failed of N | tasks finished N | tokens
N`), then the runs that failed and why, and the report (ROOT/report/report.md).
Per-run configs: configs/paper.py:<benchmark>,<agent>,<backbone>.
"""
import pathlib

from countermem_jax import baselines
from countermem_jax.protocol import config_files
from countermem_jax.sweep.spec import default_sweep

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")


def get_config():
    c = default_sweep()
    c.root = "runs/sweeps/paper_grid"          # a path every host mounts
    c.benchmarks = tuple(PAPER.SETTINGS)        # the twelve settings of Appendix D.1
    c.agents = ("react", "reflexion")
    c.backbones = ("gptoss", "api")
    c.methods = tuple(baselines.METHODS)
    c.seeds = (0, 1, 2, 3, 4)                   # Appendix C.2, Table 4
    c.progress_every_s = 60.0
    return c
