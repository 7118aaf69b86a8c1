r"""Quickstart: ReAct ± CounterMem on Spider with the CPU model (Qwen2.5-Coder-0.5B, llama.cpp).

    bash launch/quickstart_cpu.sh            # install, then the three commands below
    python -m countermem_jax.build_memory   --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.train_selector --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.evaluate       --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu

Short CPU schedule (documented, not the paper's): 8 Spider databases, 20 construction tasks with
one expanded failure and 4 counterfactual checks per task, a 30-decision selector run (learning
starts at 6, an update every decision, target sync every 10, checkpoints every 15 with 3
validation tasks, one seed), 20 held-out tasks, two attempts per task. The evaluation prints a
table of ReAct vs ReAct+CounterMem (score, tokens, calls and failures per solved task, retrieval
coverage, harmful use, rescued/broken). About 15–20 minutes on 2 cores.
"""
from countermem_jax.config_defaults import spider_cpu_config


def get_config():
    return spider_cpu_config("react")
