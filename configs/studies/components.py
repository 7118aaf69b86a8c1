r"""Study 1, components (paper §6.1, Fig. 4(a,b); Appendix D.5 component ablation).

    python -m countermem_jax.study --config=configs/studies/components.py --workdir=runs/study_components
    python -m countermem_jax.study --config=configs/studies/components.py:cpu --workdir=/tmp/study_components

The first command is the paper's size (Spider, ReAct, gpt-oss-120b served by vLLM; 60
construction, 200 + 20 selector tasks, 40 held-out tasks, five selector seeds); append
``:bird,reflexion`` etc. for another setting. Variants: the full method; *CF without WM*
(``construction.corrections=unverified_advice``: the first proposed alternative of a failed
action is distilled and stored without any check; the task's own actions are still checked);
*WM without CF* (``construction.corrections=within_task``: alternatives are checked and the best
verified one becomes the same task's next action, nothing is stored, so the selector has nothing
to choose and ``always_skip`` stands for it). It prints one row per variant: score [95% CI],
score gain over the base agent (pp, paired per task, [95% CI]), calls per solved task of the
variant and of the base agent, and the number of stored records; ``DIR/study.json`` holds the
panels (a) score gain and (b) calls per solved task.
"""
from countermem_jax.studies.configs import study_config

VARIANTS = {
    "full": ("CounterMem (full)", {}),
    "cf_without_wm": ("CF without WM", {"construction": {"corrections": "unverified_advice"}}),
    "wm_without_cf": ("WM without CF", {"construction": {"corrections": "within_task"},
                                        "eval": {"selector": "always_skip"}}),
}


def get_config(arg=None):
    return study_config(
        "components", "Components", "§6.1, Fig. 4(a,b)", VARIANTS, arg, reference="",
        columns=[("calls/solved", "metrics.calls_per_solved"),
                 ("base calls/solved", "base_metrics.calls_per_solved"),
                 ("records", "store.records")],
        figures=[dict(panel="a", title="Score gain over the base agent", kind="bar",
                      variants=list(VARIANTS), value="score_vs_base", unit="pp"),
                 dict(panel="b", title="World-model calls per solved task", kind="bar",
                      variants=list(VARIANTS), value="metrics.calls_per_solved",
                      baseline="base_metrics.calls_per_solved", unit="calls")])
