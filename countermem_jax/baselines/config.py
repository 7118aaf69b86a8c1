"""Settings of the baseline mechanisms: defaults (kept with all other defaults in
``config_defaults.baseline_defaults``) and the per-method section a memory is built with.

Hyper-parameters of the baseline mechanisms (paper §4.1, Appendix D.5).

The paper fixes only Best-of-N's N = 1 + K = 5 (Appendix D.5); the other values follow each
original where it states one (cited below) and are our choice otherwise (said so). The section of a
method is stored in its memory file's header and hashed with it, so a memory is never used under
different settings than it was built with.
"""
from countermem_jax.protocol.config_defaults import baseline_defaults as default_config  # noqa: F401


def section(cfg, method: str) -> dict:
    """The settings of ``method`` from an experiment config (defaults where it has none)."""
    key = "reasoningbank" if method.startswith("reasoningbank") else method
    defaults = default_config()[key].to_dict()
    given = cfg.get("baselines") if cfg is not None else None
    if given is not None and key in given:
        defaults.update(given[key].to_dict())
    return {k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()}
