r"""Quickstart: ReAct ± CounterMem on Spider with the CPU model (Qwen2.5-Coder-0.5B, llama.cpp).

    bash launch/quickstart_cpu.sh            # install, then the three commands below
    python -m countermem_jax.build_memory   --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.train_selector --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.evaluate       --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu

Short CPU schedule (documented, not the paper's): 4 Spider databases whose failures share the
mistakes one verified repair fixes, 30 construction tasks with the paper's two expanded failures,
K = 4 and 8 counterfactual checks per task, a 30-decision selector run (learning starts at 6, an
update every decision, target sync every 10, checkpoints every 15 with 3 validation tasks, one
seed), 20 held-out tasks, two attempts per task. Records carry the condition derived from their
checked edit, checked at retrieval (``memory.fallback_condition=derive``); a record the selector
chooses is applied by replaying its checked edit on the draft (``memory.revision=replay``;
neither CPU model adapts a record to another question, docs/cpu_models.md). The evaluation prints
a table of ReAct vs ReAct+CounterMem (score, tokens, calls and failures per solved task,
retrieval coverage, harmful use, rescued/broken), then one evaluation task where a record changed
the draft (or, if none did, why).

The model: ``--config.backbone.cpu_model=qwen2.5-coder-1.5b`` picks the 1.5B (install
launch/requirements-cpu-model-1.5b.txt first; docs/cpu_models.md). Each template asks for its
own token budget, capped by ``agent.max_tokens`` = 512.
Measured (2026-11-27, 2 cores, 0.5B, greedy, on this config as committed with the issue-36
changes): 1,683 s after installation, the test suite beside it for its first 20 minutes.
Construction: 23 tasks, 6 solved; 23 counterfactual checks; 3 records; transfer checks replayed 2
records 4 times, 1 verified, 1 record refuted. Selector: 31 decisions. Evaluation: ReAct 30.0 =
ReAct+CounterMem 30.0 on 20 tasks, +0.0 pp; 1 record use, which changed its draft (still wrong);
rescued 0, broken 0. These databases are the tuning pool's; every earlier result of this config
is in docs/ledger.md.
"""
from countermem_jax.protocol.config_defaults import spider_cpu_config


def get_config():
    return spider_cpu_config("react")
