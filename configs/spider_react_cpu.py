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
Measured (2026-11-27, 2 cores, 0.5B, greedy): the whole quickstart took 826 s and 1,090 s after
installation (two runs, the same replies). Construction: 23 tasks, 6 solved; 16 counterfactual
checks, 7 improved (error repair 3/9, the model's edits 2/2 of 16 proposed (14 screened out),
rule edits 1/4, schema linking 1/1); 0 unparseable replies, 0 cut at their budget; 6 records.
Selector: 31 decisions, a record chosen at 10 (3 solved their task). Evaluation: ReAct 35.0 vs
ReAct+CounterMem 45.0, +10.0 pp [+0.0, +25.0] on 20 tasks; 4 record uses, rescued 2 (one
against an empty reference result), broken 0.
"""
from countermem_jax.protocol.config_defaults import spider_cpu_config


def get_config():
    return spider_cpu_config("react")
