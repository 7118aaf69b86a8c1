"""The protocol studies (5–9: accumulation, transfer, rescued, budget, breakdown), whose cells are
not config variants of one run but follow their own protocol (snapshots over orderings,
source–target pairs, several benchmarks, a token budget). Each module has
``run(study_cfg, workdir, *, backbone=None, benchmark=None) -> dict`` and writes
``WORKDIR/study.json`` in the ``countermem-study-rows/1`` schema (``studies.cells``).

A study config holds ``study`` (the name), ``base`` (the run config every cell starts from) and
``protocol`` (the study's parameters); ``run`` validates ``base`` first, so a bad field is refused
in one line before any data or model is loaded.
"""
import importlib

from countermem_jax import config_validation

STUDIES = {name: f"countermem_jax.studies.{name}"
           for name in ("accumulation", "transfer", "rescued", "budget", "breakdown")}


def run(study_cfg, workdir, *, backbone=None, benchmark=None) -> dict:
    """Runs the protocol study named by ``study_cfg.study``."""
    if study_cfg.study not in STUDIES:
        raise config_validation.ConfigError(
            f"bad study config: study={study_cfg.study!r} is not one of: {', '.join(STUDIES)}")
    config_validation.validate(study_cfg.base)
    module = importlib.import_module(STUDIES[study_cfg.study])
    return module.run(study_cfg, workdir, backbone=backbone, benchmark=benchmark)
