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
Measured (2026-11-25, 2 cores shared with other jobs, load average 7-11, 0.5B, greedy): first
attempts on 40 seeded shipped Spider questions, the former DRAFT_ACTION 6/40, a plain zero-shot
prompt 20/40; on the first 20 of them the current DRAFT_ACTION 8, zero-shot 10. The yield
benchmark (perf/yield.py --n=4 --threads=1): 9 counterfactual checks (model edits 0/7, rule
edits 0/2 verified), 0 records, 0 unparseable replies, 2 of 3 edit replies stopped at their
512-token budget, 2 model edits refused as not local, 7,288 tokens, 381 s (before the edit
reply was constrained to JSON and the SQL operators filled the free slots).
The whole quickstart on the final code (2026-11-25, 2 cores shared with a test run): 1,506 s
after installation; 16 construction tasks, 6 solved; 26 counterfactual checks, 1 verified (model
edits 0/5, error repair 0/11, schema linking 1/8, joins 0/1, rule edits 0/1), 0 replies cut off,
0 constraint violations; 1 record (a table swap); ReAct 45.0 vs ReAct+CounterMem 45.0, 0 uses.
"""
from countermem_jax.protocol.config_defaults import spider_cpu_config


def get_config():
    return spider_cpu_config("react")
