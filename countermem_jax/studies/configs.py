"""Building blocks of the study configs (``configs/studies/*.py``): the study ConfigDict the
runner reads (layout in ``countermem_jax.studies``), around a per-run ``base`` config the study
config file makes (``configs/paper.py:study_base``)."""
import ml_collections


def study_config(name: str, title: str, paper: str, variants: dict, base, *,
                 reference: str = "", columns=(), figures=(), task_kinds=None,
                 base_updates: dict | None = None) -> ml_collections.ConfigDict:
    """A study config over the run config ``base``, locked; ``variants`` maps a name to (label,
    nested overrides dict); ``columns`` are (header, study.json key) pairs printed after score and
    score change."""
    c = ml_collections.ConfigDict()
    c.study, c.title, c.paper, c.reference = name, title, paper, reference
    c.base = base
    c.base.update_from_flattened_dict(base_updates or {})
    c.base.lock()
    c.variants = ml_collections.ConfigDict({
        v: {"label": label, "overrides": overrides} for v, (label, overrides) in variants.items()})
    c.columns = tuple((h, k) for h, k in columns)
    c.figures = tuple(dict(f) for f in figures)
    if task_kinds:
        c.task_kinds = ml_collections.ConfigDict(task_kinds)
    return c


def four_domain_config(study: ml_collections.ConfigDict, base, settings, full: str,
                       panels: list, *, setting_sizes: bool = True) -> ml_collections.ConfigDict:
    """``study`` (a one-setting study config) run over Table 1's four domains and both agents
    (``studies.grid``) from the run config ``base``; ``settings`` the paper settings the other
    benchmarks take ({benchmark: {splits, data}}); ``full`` the full method's variant; ``panels``
    Fig. 4's panels: {panel, title, stats, unit}; ``setting_sizes`` False keeps ``base``'s split
    sizes for every benchmark (the CPU schedule)."""
    from countermem_jax.studies import grid
    c = ml_collections.ConfigDict(study.to_dict())
    c.base = base
    c.grid = grid.grid_section(full)
    if not setting_sizes:
        c.grid.setting_sizes = False
    c.grid_panels = tuple(dict(p) for p in panels)
    c.settings = settings
    return c
