r"""Study 2, retrieval interventions (paper §6.2, Fig. 4(c,d); Appendix D.4, D.5).

    python -m countermem_jax.study --config=configs/studies/retrieval.py --workdir=runs/study_retrieval
    python -m countermem_jax.study --config=configs/studies/retrieval.py:cpu --workdir=/tmp/study_retrieval

The second is the smallest command that runs here (the CPU model on Spider); the first
is the paper's size (Spider, ReAct, gpt-oss-120b; paper defaults). All four
variants read one built store and one trained selector (built once, copied); only the records
reaching the selector change (``eval.retrieval_intervention``, seeded by
``eval.intervention_seed``; the current task's own records stay excluded): none (no record),
random (k records sampled without state matching), shuffled (records reassigned to other records'
decision states), matched (the method). It prints per variant: score [95% CI], score change vs
*none* (pp, paired per task), action changes and harmful changes per retrieved record (harmful:
worse than the memory-free run at the same decision, Fig. 5(d)), and the number of retrieved
records (the denominator).

Fig. 4(c,d) over Table 1's four domains and both agents, each against its own base agent::

    python -m countermem_jax.study --config=configs/studies/retrieval.py:four_domains --workdir=runs/retrieval4
    python -m countermem_jax.report runs/retrieval4 --out runs/report_retrieval4

Layout, Ray and "not run" settings as in ``components.py:four_domains``. Smallest command that
runs here (CPU model, both agents; Spider and SATLIB run, Math reads "not run: Lean absent",
Coding "not run: data absent")::

    python -m countermem_jax.study --config=configs/studies/retrieval.py:four_domains,cpu \
        --config.base.splits.n_build=4 --config.base.splits.n_train=2 \
        --config.base.splits.n_validation=1 --config.base.splits.n_eval=4 \
        --config.base.selector.total_decisions=4 --config.base.selector.learning_starts=2 \
        --config.base.selector.checkpoint_every=4 --workdir=/tmp/retrieval4

Paper reference (gpt-oss-120b, ReAct / Reflexion, §6.2): score change, random +0.6 / +0.4 pp,
shuffled −1.1 / −0.9 pp, matched +18.5 / +8.2 pp; per retrieved record, shuffled 0.21 action
changes and 0.17 harmful changes, matched 0.29 and 0.03.
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies.configs import four_domain_config, study_config

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")
VARIANTS = {name: (name, {"eval": {"retrieval_intervention": name}})
            for name in ("none", "random", "shuffled", "matched")}


PANELS = [dict(panel="c", title="Score gain over the base agent", stats=("gain",), unit="pp"),
          dict(panel="d", title="Action and harmful changes per retrieved record",
               stats=("changes_per_retrieved", "harmful_per_retrieved"),
               unit="per retrieved record")]


def get_config(arg=None):
    if (arg or "").startswith("four_domains"):
        backbone = (arg.split(",") + ["gptoss"])[1]
        base = PAPER.study_base("cpu" if backbone == "cpu" else f"spider,react,{backbone}")
        return four_domain_config(get_config(), base, PAPER.settings(), "matched", PANELS,
                                  setting_sizes=backbone != "cpu")
    return study_config(
        "retrieval", "Retrieval interventions", "§6.2, Fig. 4(c,d)", VARIANTS,
        PAPER.study_base(arg),
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
