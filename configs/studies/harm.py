r"""Study 10 (beyond the paper), harm measured against the paired draft.

    python -m countermem_jax.study --config=configs/studies/harm.py --workdir=runs/study_harm
    python -m countermem_jax.study --config=configs/studies/harm.py:cpu --workdir=/tmp/study_harm

The second is the smallest command that runs here (the CPU model on Spider); the first
is the paper's size (Spider, ReAct, gpt-oss-120b). The paper's reuse label is
neutral when memory changes a first attempt, so a record that breaks a task the draft would have
solved is never counted harmful. The memory-free base run executed that draft at the same decision:
beside the paper's harmful-use rate, each selected use is judged against the paired draft's own
outcome (``metrics.draft_paired_harm``; uses whose history diverged from the base run are left
unpaired and counted). Two variants on one store: the trained DQN and always-top-1 (every
retrieval used). It prints per variant: score, change vs base, the paper's harmful-use rate, the
draft-paired harmful rate, paired / unpaired uses, and broken tasks.
"""
from countermem_jax.studies.configs import study_config

VARIANTS = {"dqn": ("DQN selector", {}),
            "always_top1": ("always top-1", {"eval": {"selector": "always_top1"}})}


def get_config(arg=None):
    return study_config(
        "harm", "Harm against the paired draft", "beyond the paper (study 10)", VARIANTS, arg,
        columns=[("harmful/use (paper)", "metrics.harmful_use_rate"),
                 ("harmful/use vs draft", "metrics.harmful_vs_draft_rate"),
                 ("paired uses", "metrics.draft_paired_uses"),
                 ("unpaired uses", "metrics.draft_unpaired_uses")],
        figures=[dict(panel="a", title="Harmful use per selected use: reuse label vs paired draft",
                      kind="grouped_bar", variants=list(VARIANTS),
                      values=["metrics.harmful_use_rate", "metrics.harmful_vs_draft_rate"],
                      unit="per selected use")])
