r"""Study 10 (beyond the paper), harm measured against the paired draft.

    python -m countermem_jax.study --config=configs/studies/harm.py --workdir=runs/study_harm
    python -m countermem_jax.study --config=configs/studies/harm.py:cpu --workdir=/tmp/study_harm

The second is the smallest command that runs here (the CPU model on Spider); the first
is the paper's size (Spider, ReAct, gpt-oss-120b). A use is harmful when its revised action does
worse than the memory-free base run's at the same decision (Fig. 5(d); ``metrics.paired_harm``).
Beside it, the stricter pairing of study 10: only uses whose draft is the very action the base
run executed there (same history; ``metrics.draft_paired_harm``), and the reuse label −1 of
Eq. 6, which on a binary-scored benchmark stopping at its first success cannot be anything but 0
(a changed first attempt that fails has no previous attempt to be worse than). Two variants on
one store: the trained DQN and always-top-1 (every retrieval used). It prints per variant: score,
change vs base, the three harmful rates, paired / unpaired uses, and broken tasks.
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies.configs import study_config

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")
VARIANTS = {"dqn": ("DQN selector", {}),
            "always_top1": ("always top-1", {"eval": {"selector": "always_top1"}})}


def get_config(arg=None):
    return study_config(
        "harm", "Harm against the paired draft", "beyond the paper (study 10)", VARIANTS,
        PAPER.study_base(arg),
        columns=[("harmful/use vs no memory", "metrics.harmful_use_rate"),
                 ("harmful/use vs same draft", "metrics.harmful_vs_draft_rate"),
                 ("reuse label -1/use", "metrics.reuse_label_harmful_rate"),
                 ("paired uses", "metrics.draft_paired_uses"),
                 ("unpaired uses", "metrics.draft_unpaired_uses")],
        figures=[dict(panel="a", title="Harmful use: vs the memory-free run, vs the same draft",
                      kind="grouped_bar", variants=list(VARIANTS),
                      values=["metrics.harmful_use_rate", "metrics.harmful_vs_draft_rate"],
                      unit="per paired use")])
