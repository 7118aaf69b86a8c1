r"""Reflexion ± CounterMem on Spider with the CPU model: the quickstart schedule, Reflexion agent.

    python -m countermem_jax.build_memory   --config=configs/spider_reflexion_cpu.py --workdir=runs/spider_refl_cpu
    python -m countermem_jax.train_selector --config=configs/spider_reflexion_cpu.py --workdir=runs/spider_refl_cpu
    python -m countermem_jax.evaluate       --config=configs/spider_reflexion_cpu.py --workdir=runs/spider_refl_cpu

Prints the table of Reflexion vs Reflexion+CounterMem; about 20–25 minutes on 2 cores.
"""
from countermem_jax.config_defaults import spider_cpu_config


def get_config():
    return spider_cpu_config("reflexion")
