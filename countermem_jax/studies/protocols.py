"""The protocol studies (5–9: accumulation, transfer, rescued, budget, breakdown; and the
replication over split seeds, ``studies.replication``), whose cells are not config variants of
one run but follow their own protocol (snapshots over orderings, source–target pairs, several
benchmarks, a token budget, split seeds). Each module has
``run(study_cfg, workdir, *, backbone=None, benchmark=None) -> dict`` and writes
``WORKDIR/study.json`` in the ``countermem-study-rows/1`` schema (``studies.cells``).

A study config holds ``study`` (the name), ``base`` (the run config every cell starts from) and
``protocol`` (the study's parameters); ``run`` validates ``base`` first, so a bad field is refused
in one line before any data or model is loaded.
"""
import importlib

import ml_collections

from countermem_jax.phases import config_validation

STUDIES = {name: f"countermem_jax.studies.{name}"
           for name in ("accumulation", "transfer", "rescued", "budget", "breakdown",
                        "replication")}


def run(study_cfg, workdir, *, backbone=None, benchmark=None) -> dict:
    """Runs the protocol study named by ``study_cfg.study``."""
    if study_cfg.study not in STUDIES:
        raise config_validation.ConfigError(
            f"bad study config: study={study_cfg.study!r} is not one of: {', '.join(STUDIES)}")
    config_validation.validate(study_cfg.base)
    module = importlib.import_module(STUDIES[study_cfg.study])
    return module.run(study_cfg, workdir, backbone=backbone, benchmark=benchmark)


def study_config(name: str, base, **protocol) -> ml_collections.ConfigDict:
    """A protocol study's config: its name, the per-run ``base`` config and ``protocol``."""
    c = ml_collections.ConfigDict()
    c.study, c.base, c.protocol = name, base, ml_collections.ConfigDict(protocol)
    return c


def paper_study(name: str, base, settings, *, seeds: tuple | None = (0,),
                splits: dict | None = None, **protocol) -> ml_collections.ConfigDict:
    """A protocol study over the run config ``base`` (cells of other benchmarks take their
    paper setting from ``settings``, {benchmark: {splits, data}}), ``seeds`` selector seeds
    (None: ``base``'s), ``splits`` overriding the split sizes."""
    if seeds is not None:
        base.selector.seeds = tuple(seeds)
    base.splits.update(splits or {})
    c = study_config(name, base, **protocol)
    c.settings = settings
    return c
