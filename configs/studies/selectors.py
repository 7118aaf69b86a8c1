r"""Study 11 (beyond the paper), learned vs fixed selectors (the paper's stated limitation).

    python -m countermem_jax.study --config=configs/studies/selectors.py --workdir=runs/study_selectors
    python -m countermem_jax.study --config=configs/studies/selectors.py:cpu --workdir=/tmp/study_selectors

The second is the smallest command that runs here (the CPU model on Spider); the first
is the paper's size (Spider, ReAct, gpt-oss-120b, five DQN seeds). One store,
one trained DQN and the same held-out tasks for all four: the DQN, always-skip, always-top-1 and a
relevance threshold (``eval.relevance_threshold``, 0.5). It prints per selector: score [95% CI],
change vs the base agent, selected record uses, harmful-use rate and calls per solved task.
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies.configs import study_config

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")
VARIANTS = {"dqn": ("DQN", {}),
            **{name: (name.replace("_", " "), {"eval": {"selector": name}})
               for name in ("always_skip", "always_top1", "relevance_threshold")}}


def get_config(arg=None):
    return study_config(
        "selectors", "Learned vs fixed selectors", "beyond the paper (study 11)", VARIANTS,
        PAPER.study_base(arg),
        columns=[("selected uses", "metrics.selected_uses"),
                 ("harmful/use", "metrics.harmful_use_rate"),
                 ("calls/solved", "metrics.calls_per_solved")],
        figures=[dict(panel="a", title="Score gain over the base agent by selector", kind="bar",
                      variants=list(VARIANTS), value="score_vs_base", unit="pp")])
