"""A laptop-sized sweep: Spider, ReAct, the CPU model, CounterMem and the base agent, 2 seeds.

    python -m countermem_jax.sweep --sweep=configs/sweeps/spider_cpu.py --dry_run
    python -m countermem_jax.sweep --sweep=configs/sweeps/spider_cpu.py --local

The dry run prints 6 phase runs in 2 workdirs: the CounterMem build, training and evaluation
of seeds 0 and 1 (the second evaluation also aggregates both seeds), and the base agent's
evaluation (method none). `--local` runs them one after another in this process (the
quickstart's schedule, `configs/paper.py:spider,react,cpu`), printing a summary line every 30 s, and
writes the report to runs/sweeps/spider_cpu/report/.
"""
from countermem_jax.sweep.spec import default_sweep


def get_config():
    c = default_sweep()
    c.root = "runs/sweeps/spider_cpu"
    c.benchmarks = ("spider",)
    c.agents = ("react",)
    c.backbones = ("cpu",)
    c.methods = ("countermem", "none")
    c.seeds = (0, 1)
    c.cpus.update(build_memory=1.0, evaluate=1.0)
    c.progress_every_s = 30.0
    return c
