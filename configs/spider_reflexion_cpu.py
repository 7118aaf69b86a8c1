r"""Reflexion ± CounterMem on Spider with the CPU model: the quickstart schedule, Reflexion agent.

    python -m countermem_jax.build_memory   --config=configs/spider_reflexion_cpu.py --workdir=runs/spider_refl_cpu
    python -m countermem_jax.train_selector --config=configs/spider_reflexion_cpu.py --workdir=runs/spider_refl_cpu
    python -m countermem_jax.evaluate       --config=configs/spider_reflexion_cpu.py --workdir=runs/spider_refl_cpu

Prints the table of Reflexion vs Reflexion+CounterMem; about 20–25 minutes on 2 cores.
"""
import importlib.util
import os


def get_config():
    spec = importlib.util.spec_from_file_location(
        "spider_react_cpu", os.path.join(os.path.dirname(__file__), "spider_react_cpu.py"))
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    c = base.get_config()
    c.agent.kind = "reflexion"
    return c
