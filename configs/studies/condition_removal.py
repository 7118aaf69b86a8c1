r"""Study 3, condition removal (paper Appendix E.3, Fig. 6(b); Appendix D.4 denominators).

    python -m countermem_jax.study --config=configs/studies/condition_removal.py --workdir=runs/study_conditions
    python -m countermem_jax.study --config=configs/studies/condition_removal.py:cpu --workdir=/tmp/study_conditions

The second is the smallest command that runs here (the CPU model on Spider); the first
is the paper's size (Spider, ReAct, gpt-oss-120b). Both variants read one store
and one trained selector; ``eval.remove_conditions`` removes the applicability condition c at both
sites (the retrieval filter no longer enforces it, the rendered record no longer shows it),
everything else unchanged (under the ``:cpu`` base's ``memory.revision=replay`` no record is
rendered, so there only the filter differs). Harmful use is per selected record use, on ordinary and on look-alike
tasks: a held-out task is *look-alike* when the condition-free run retrieved a record whose
condition is false for it (a record the run with conditions kept out of the same task). It prints
per variant: score [95% CI], change vs the base agent, and the harmful-use rate overall, on
ordinary and on look-alike tasks (with the number of look-alike tasks).
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies.configs import study_config

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")
VARIANTS = {"with_condition": ("with c (method)", {}),
            "without_condition": ("without c", {"eval": {"remove_conditions": True}})}


def get_config(arg=None):
    return study_config(
        "condition_removal", "Condition removal", "App. E.3, Fig. 6(b)", VARIANTS,
        PAPER.study_base(arg),
        columns=[("harmful/use", "metrics.harmful_use_rate"),
                 ("harmful/use ordinary", "by_task_kind.ordinary.harmful_use_rate"),
                 ("harmful/use look-alike", "by_task_kind.look_alike.harmful_use_rate"),
                 ("look-alike tasks", "by_task_kind.look_alike.n_tasks")],
        figures=[dict(panel="b", title="Harmful use per selected use", kind="grouped_bar",
                      variants=list(VARIANTS),
                      values=["by_task_kind.ordinary.harmful_use_rate",
                              "by_task_kind.look_alike.harmful_use_rate"],
                      unit="per selected use")],
        task_kinds={"with_conditions": "with_condition",
                    "without_conditions": "without_condition"})
