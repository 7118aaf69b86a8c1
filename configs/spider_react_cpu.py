r"""Quickstart: ReAct ± CounterMem on Spider with the CPU model (Qwen2.5-Coder-0.5B, llama.cpp).

    bash launch/quickstart_cpu.sh            # install, then the three commands below
    python -m countermem_jax.build_memory   --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.train_selector --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.evaluate       --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu

Short CPU schedule (documented, not the paper's): 6 Spider databases whose questions share the
mistakes a record fixes, 30 construction tasks with the paper's two expanded failures, K = 4 and
8 counterfactual checks per task, a 30-decision selector run (learning starts at 6, an update
every decision, target sync every 10, checkpoints every 15 with 3 validation tasks, one seed), 20
held-out tasks, two attempts per task. Records carry the condition derived from their checked
edit, checked at retrieval (``memory.fallback_condition=derive``). The evaluation prints a table
of ReAct vs ReAct+CounterMem (score, tokens, calls and failures per solved task, retrieval
coverage, harmful use, rescued/broken), then one evaluation task where a record changed the draft
(or, if none did, why).

The model: ``--config.backbone.cpu_model=qwen2.5-coder-1.5b`` picks the 1.5B (install
launch/requirements-cpu-model-1.5b.txt first; docs/cpu_models.md). Each template asks for its
own token budget, capped by ``agent.max_tokens`` = 512.
Measured (2026-11-25, 2 cores, 0.5B, greedy): the whole quickstart took 1,051 s after
installation. Construction: 25 tasks, 13 solved; 16 counterfactual checks, 6 improved (error
repair 5/10, rule edits 1/2, joins 0/2, schema linking 0/2; the model's 4 edits that ran were
screened out before a check); 0 unparseable replies; one DRAFT_ACTION reply cut at 512 tokens,
whose retry with the repetition penalty ended with a query; 5 records. Evaluation: ReAct 40.0 vs
ReAct+CounterMem 40.0 on 20 tasks; a record's condition held at 2 decisions (both after a
`no such column` error), the selector skipped both: 0 uses, rescued 0, broken 0.
"""
from countermem_jax.protocol.config_defaults import spider_cpu_config


def get_config():
    return spider_cpu_config("react")
