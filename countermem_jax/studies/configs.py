"""Building blocks of the study configs (``configs/studies/*.py``): the per-run base config and
the study ConfigDict the runner reads (layout in ``countermem_jax.studies``).

A study config file takes an optional argument after a colon, the base run config:
  ``configs/studies/components.py``             the paper's setting: Spider, ReAct, gpt-oss-120b
                                                 (``config_defaults.setting_config``);
  ``configs/studies/components.py:cpu``         the CPU quickstart schedule (Qwen2.5-Coder-0.5B);
  ``configs/studies/components.py:bird,reflexion,api``  benchmark, agent, backbone family
                                                 (``configs/paper.py``'s argument).
"""
import ml_collections

from countermem_jax.protocol import config_defaults


def base_run_config(arg: str | None = None) -> ml_collections.ConfigDict:
    """The per-run config every variant starts from (see the module docstring for ``arg``)."""
    if arg in (None, "", "gptoss"):
        return config_defaults.setting_config("spider", "react")
    parts = arg.split(",")
    if parts[0] == "cpu":
        return config_defaults.spider_cpu_config(parts[1] if len(parts) > 1 else "react")
    if len(parts) < 3:
        parts = (parts + ["react", "gptoss"])[:3]
    return config_defaults.paper_config(",".join(parts))   # configs/paper.py's argument


def study_config(name: str, title: str, paper: str, variants: dict, arg: str | None, *,
                 reference: str = "", columns=(), figures=(), task_kinds=None,
                 base_updates: dict | None = None) -> ml_collections.ConfigDict:
    """A locked study config; ``variants`` maps a name to (label, nested overrides dict);
    ``columns`` are (header, study.json key) pairs printed after score and score change."""
    c = ml_collections.ConfigDict()
    c.study, c.title, c.paper, c.reference = name, title, paper, reference
    c.base = base_run_config(arg)
    c.base.update_from_flattened_dict(base_updates or {})
    c.base.lock()
    c.variants = ml_collections.ConfigDict({
        v: {"label": label, "overrides": overrides} for v, (label, overrides) in variants.items()})
    c.columns = tuple((h, k) for h, k in columns)
    c.figures = tuple(dict(f) for f in figures)
    if task_kinds:
        c.task_kinds = ml_collections.ConfigDict(task_kinds)
    return c


def four_domain_config(study: ml_collections.ConfigDict, arg: str, full: str,
                       panels: list) -> ml_collections.ConfigDict:
    """``study`` (a one-setting study config) run over Table 1's four domains and both agents
    (``studies.grid``). ``arg`` is ``four_domains[,<backbone>]`` (gptoss, api, cpu); ``full`` the
    full method's variant; ``panels`` Fig. 4's panels: {panel, title, stats, unit}."""
    backbone = (arg.split(",") + ["gptoss"])[1]
    from countermem_jax.studies import grid
    c = ml_collections.ConfigDict(study.to_dict())
    c.base = base_run_config("cpu" if backbone == "cpu" else f"spider,react,{backbone}")
    c.grid = grid.grid_section(full)
    if backbone == "cpu":   # the CPU schedule's sizes for every benchmark
        c.grid.setting_sizes = False
    c.grid_panels = tuple(dict(p) for p in panels)
    return c
