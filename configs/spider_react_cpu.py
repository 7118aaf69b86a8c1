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
from countermem_jax.config_defaults import base_config


def get_config():
    c = base_config()
    c.data.benchmark = "spider"
    # Databases on which the 0.5B model is neither hopeless nor perfect (see CALIBRATION.md).
    c.data.db_ids = ("concert_singer", "pets_1", "singer", "poker_player", "museum_visit",
                     "employee_hire_evaluation", "tvshow", "course_teach")
    c.splits.update(n_build=20, n_train=16, n_validation=3, n_eval=20)
    c.agent.update(kind="react", max_attempts=2, max_tokens=160, token_budget=12_000)
    c.backbone.update(kind="llama_cpp", n_ctx=4096, cache_dir="auto")
    # The 0.5B model cannot judge free-text conditions (it answers YES to everything), so those
    # are scoped to the source database, and construction only reuses clearly related records.
    c.construction.update(verification_budget=4, max_expanded_failures=1,
                          scope_free_text_conditions=True, reuse_policy="relevance_threshold",
                          relevance_threshold=0.5)
    c.selector.update(total_decisions=30, learning_starts=6, train_every=1, target_sync_every=10,
                      checkpoint_every=15, batch_size=16, seeds=(0,))
    return c
