r"""Study 2, retrieval interventions (paper §6.2, Fig. 4(c,d); Appendix D.4, D.5).

    python -m countermem_jax.study --config=configs/studies/retrieval.py --workdir=runs/study_retrieval
    python -m countermem_jax.study --config=configs/studies/retrieval.py:cpu --workdir=/tmp/study_retrieval

The first command is the paper's size (Spider, ReAct, gpt-oss-120b; paper defaults). All four
variants read one built store and one trained selector (built once, copied); only the records
reaching the selector change (``eval.retrieval_intervention``, seeded by
``eval.intervention_seed``; the current task's own records stay excluded): none (no record),
random (k records sampled without state matching), shuffled (records reassigned to other records'
decision states), matched (the method). It prints per variant: score [95% CI], score change vs
*none* (pp, paired per task), action changes and harmful changes per retrieved record (harmful:
reuse label −1), and the number of retrieved records (the denominator).
"""
from countermem_jax.studies.configs import study_config

VARIANTS = {name: (name, {"eval": {"retrieval_intervention": name}})
            for name in ("none", "random", "shuffled", "matched")}


def get_config(arg=None):
    return study_config(
        "retrieval", "Retrieval interventions", "§6.2, Fig. 4(c,d)", VARIANTS, arg,
        reference="none",
        columns=[("changes/retrieved", "metrics.action_changes_per_retrieved"),
                 ("harmful/retrieved", "metrics.harmful_changes_per_retrieved"),
                 ("retrieved records", "metrics.retrieved_records")],
        figures=[dict(panel="c", title="Score change vs no retrieval", kind="bar",
                      variants=list(VARIANTS), value="score_change", unit="pp"),
                 dict(panel="d", title="Action / harmful changes per retrieved record",
                      kind="grouped_bar", variants=list(VARIANTS),
                      values=["metrics.action_changes_per_retrieved",
                              "metrics.harmful_changes_per_retrieved"],
                      unit="per retrieved record")])
