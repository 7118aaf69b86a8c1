r"""Quickstart: ReAct ± CounterMem on Spider with the CPU model (Qwen2.5-Coder-0.5B, llama.cpp).

    bash launch/quickstart_cpu.sh            # install, then the three commands below
    python -m countermem_jax.build_memory   --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.train_selector --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu
    python -m countermem_jax.evaluate       --config=configs/spider_react_cpu.py --workdir=runs/spider_cpu

Short CPU schedule (documented, not the paper's): 24 construction tasks, a 40-decision selector
run (learning starts at 8, an update every decision, target sync every 10, checkpoints every 20
with 3 validation tasks, one seed), 24 held-out tasks, two attempts per task. The evaluation prints a
table of ReAct vs ReAct+CounterMem (score, tokens, calls and failures per solved task, retrieval
coverage, harmful use, rescued/broken). About 15–20 minutes on 2 cores.
"""
from countermem_jax.config_defaults import base_config


def get_config():
    c = base_config()
    c.data.benchmark = "spider"
    c.splits.update(n_build=24, n_train=16, n_validation=3, n_eval=24)
    c.agent.update(kind="react", max_attempts=2, max_tokens=160, token_budget=12_000)
    c.backbone.update(kind="llama_cpp", n_ctx=4096, cache_dir="auto")
    c.construction.update(verification_budget=6)
    c.selector.update(total_decisions=40, learning_starts=8, train_every=1, target_sync_every=10,
                      checkpoint_every=20, batch_size=16, seeds=(0,))
    return c
