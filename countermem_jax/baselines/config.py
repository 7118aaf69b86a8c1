"""The per-method section a baseline's memory is built with (paper §4.1, Appendix D.5; values in
``configs/default.py``, ``baselines``). The section of a method is stored in its memory file's
header and hashed with it, so a memory is never used under other settings than it was built
with."""


def section(cfg, method: str) -> dict:
    """The settings of ``method`` from an experiment config's ``baselines`` section."""
    key = "reasoningbank" if method.startswith("reasoningbank") else method
    settings = cfg.baselines[key].to_dict()
    return {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}
