r"""Study 4, retention rules at equal capacity (paper §5.2(d), Fig. 3(d); Appendix D.3).

    python -m countermem_jax.study --config=configs/studies/retention.py --workdir=runs/study_retention
    python -m countermem_jax.study --config=configs/studies/retention.py:cpu --workdir=/tmp/study_retention

The second is the smallest command that runs here (the CPU model on Spider); the first
is the paper's size (Spider, ReAct, gpt-oss-120b). The paper's B = 200 rarely
binds on a 60-task stream, so this study sets ``memory.capacity = 10`` for every rule (CPU: 2),
which binds whenever construction admits more records; each variant builds its own store (the
rule decides evictions during construction) and trains its own selector. It prints per rule:
score [95% CI], change vs the base agent, the records kept and the evictions (0 evictions: the
capacity did not bind and the rule made no difference; ``study.json`` says so per variant).
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies.configs import study_config

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")
CAPACITY = {"gptoss": 10, "cpu": 2}
VARIANTS = {rule: (rule, {"memory": {"retention": rule}})
            for rule in ("utility", "similarity", "recency", "random")}


def get_config(arg=None):
    capacity = CAPACITY["cpu" if (arg or "").startswith("cpu") else "gptoss"]
    return study_config(
        "retention", "Retention rules at equal capacity", "§5.2(d), Fig. 3(d)", VARIANTS,
        PAPER.study_base(arg),
        base_updates={"memory.capacity": capacity},
        columns=[("records", "store.records"), ("evictions", "store.evictions"),
                 ("capacity", "store.capacity")],
        figures=[dict(panel="d", title=f"Score by retention rule at capacity {capacity}",
                      kind="bar", variants=list(VARIANTS), value="score", unit="score")])
