r"""Study 1, components (paper §6.1, Fig. 4(a,b); Appendix D.5 component ablation).

    python -m countermem_jax.study --config=configs/studies/components.py --workdir=runs/study_components
    python -m countermem_jax.study --config=configs/studies/components.py:cpu --workdir=/tmp/study_components

The second is the smallest command that runs here (the CPU model on Spider); the first
is the paper's size (Spider, ReAct, gpt-oss-120b served by vLLM; 60
construction, 200 + 20 selector tasks, 40 held-out tasks, five selector seeds); append
``:bird,reflexion`` etc. for another setting. Variants: the full method; *CF without WM*
(``construction.corrections=unverified_advice``: the first proposed alternative of a failed
action is distilled and stored without any check; the task's own actions are still checked);
*WM without CF*, labelled "test-time checks against the reference" (``construction.corrections=
within_task``: after a failure at evaluation, alternatives are checked against the task's own
reference outside the attempt budget and the best verified one becomes the same task's next
action, nothing is stored, so the selector has nothing to choose and ``always_skip`` stands for
it: an oracle search, not a memory; its calls per solved task count those checks). It prints one
row per variant: score [95% CI], score gain over the base agent (pp, paired per task, [95% CI]),
calls per solved task of the variant and of the base agent, and the number of stored records;
``DIR/study.json`` holds the panels (a) score gain and (b) calls per solved task.

Fig. 4(a,b) over Table 1's four domains (Math, Coding, Text-to-SQL, SAT; every benchmark of each,
averaged within its domain) and both agents, each against its own base agent, in one command::

    python -m countermem_jax.study --config=configs/studies/components.py:four_domains --workdir=runs/components4
    python -m countermem_jax.report runs/components4 --out runs/report_components4

Each (benchmark, agent) is a setting with its paper sizes under ``DIR/<benchmark>/<agent>/``;
``--config.grid.executor=ray`` runs the settings as Ray tasks. A setting whose checker or data is
absent here is reported "not run: Lean absent" (and its domain's four-domain value with it).
Smallest command that runs here (small sizes on the CPU model, both agents; of the four domains'
benchmarks Spider and SATLIB run, Math reads "not run: Lean absent" and Coding "not run: data
absent" (no repository checkouts), so the four-domain value is none)::

    python -m countermem_jax.study --config=configs/studies/components.py:four_domains,cpu \
        --config.base.splits.n_build=4 --config.base.splits.n_train=2 \
        --config.base.splits.n_validation=1 --config.base.splits.n_eval=4 \
        --config.base.selector.total_decisions=4 --config.base.selector.learning_starts=2 \
        --config.base.selector.checkpoint_every=4 --workdir=/tmp/components4

Paper reference (gpt-oss-120b, ReAct / Reflexion, §6.1): score gain over the base agent, full
+18.5 / +8.2 pp, CF without WM +5.2 / +2.1 pp, WM without CF +7.1 / +3.4 pp; evaluator calls per
solved task, full 7.0 / 8.4, CF without WM 10.4 / 9.9, base agents 9.6 / 9.1.
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies.configs import four_domain_config, study_config

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")
VARIANTS = {
    "full": ("CounterMem (full)", {}),
    "cf_without_wm": ("CF without WM", {"construction": {"corrections": "unverified_advice"}}),
    "wm_without_cf": ("test-time checks against the reference",   # "WM without CF"
                      {"construction": {"corrections": "within_task"},
                                        "eval": {"selector": "always_skip"}}),
}


PANELS = [dict(panel="a", title="Score gain over the base agent", stats=("gain",), unit="pp"),
          dict(panel="b", title="Evaluator calls per solved task",
               stats=("calls_per_solved", "base_calls_per_solved"), unit="calls")]


def get_config(arg=None):
    if (arg or "").startswith("four_domains"):
        backbone = (arg.split(",") + ["gptoss"])[1]
        base = PAPER.study_base("cpu" if backbone == "cpu" else f"spider,react,{backbone}")
        return four_domain_config(get_config(), base, PAPER.settings(), "full", PANELS,
                                  setting_sizes=backbone != "cpu")
    return study_config(
        "components", "Components", "§6.1, Fig. 4(a,b)", VARIANTS,
        PAPER.study_base(arg), reference="",
        columns=[("calls/solved", "metrics.calls_per_solved"),
                 ("base calls/solved", "base_metrics.calls_per_solved"),
                 ("records", "store.records")],
        figures=[dict(panel="a", title="Score gain over the base agent", kind="bar",
                      variants=list(VARIANTS), value="score_vs_base", unit="pp"),
                 dict(panel="b", title="World-model calls per solved task", kind="bar",
                      variants=list(VARIANTS), value="metrics.calls_per_solved",
                      baseline="base_metrics.calls_per_solved", unit="calls")])
