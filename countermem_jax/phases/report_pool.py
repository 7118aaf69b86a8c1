"""The report pool as a check (``protocol/pools.py``): a phase whose tasks come from a report-pool
database runs only under the frozen replication's config.
"""
import functools
import importlib.util
import json
import pathlib

import ml_collections

from countermem_jax.phases import config_fingerprint, config_validation
from countermem_jax.phases.config_validation import ConfigError
from countermem_jax.protocol import pools

FROZEN = "configs/studies/replication.py:cpu"
# The pools hold the choices made with the CPU models (docs/ledger.md); the paper's settings on
# gpt-oss or a hosted model made none of them and read every database of their benchmark.
POOLED_BACKBONES = ("llama_cpp",)
_FILE = pathlib.Path(__file__).resolve().parents[2] / "configs" / "studies" / "replication.py"
_UNSCHEDULED = ("eval.concurrency",)   # how the runs are scheduled, not what they compute
_SHOWN = 3                             # differing fields the refusal names


def frozen_fields(cfg) -> dict:
    """What must equal the frozen replication's: the fingerprinted fields of both phases and
    the evaluation section, as {dotted path: JSON value}."""
    leaves = config_fingerprint._leaves(cfg)   # pylint: disable=protected-access
    return {**config_fingerprint.fingerprint_fields(cfg, "build_memory"),
            **config_fingerprint.fingerprint_fields(cfg, "train_selector"),
            **{k: v for k, v in leaves.items()
               if k.startswith("eval.") and k not in _UNSCHEDULED}}


@functools.lru_cache(maxsize=1)
def _frozen_runs() -> tuple:
    """The frozen fields of every run config the replication makes: its base on each split seed
    with each arm's or ablation's overrides (read once per process)."""
    if not _FILE.exists():
        raise ConfigError(f"the report pool can only be read under {FROZEN}, and "
                          f"{_FILE} is not there to check the config against")
    spec = importlib.util.spec_from_file_location("frozen_replication", _FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    study = module.get_config("cpu")
    p = study.protocol
    out = []
    for r in range(p.split_seeds):
        for variant in (*p.arms.values(), *p.ablations.values()):
            cfg = ml_collections.ConfigDict(study.base.to_dict())
            cfg.splits.seed = r
            config_validation.apply_overrides(cfg, variant.get("overrides"), FROZEN)
            out.append(json.dumps(frozen_fields(cfg), sort_keys=True))
    return tuple(out)


def _differences(mine: dict, theirs: dict) -> list[str]:
    """``path: frozen -> this`` for each field where the two differ."""
    absent = "<absent>"
    return [f"{k}: {theirs.get(k, absent)!r} -> {mine.get(k, absent)!r}"
            for k in sorted(set(mine) | set(theirs))
            if mine.get(k, absent) != theirs.get(k, absent)]


def check(cfg, tasks) -> None:
    """Raises ``ConfigError`` (one line) when ``tasks`` hold a report-pool database of
    ``cfg.data.benchmark`` and ``cfg`` is not one of the frozen replication's run configs."""
    if cfg.backbone.kind not in POOLED_BACKBONES:
        return   # the paper's settings (served or hosted models) read their whole benchmark
    benchmark = cfg.data.benchmark
    named = set(pools.report_pool(benchmark))
    reported = sorted({t.environment for t in tasks} & named)
    if not reported:
        return
    mine = frozen_fields(cfg)
    if json.dumps(mine, sort_keys=True) in _frozen_runs():
        return
    nearest = min((_differences(mine, json.loads(r)) for r in _frozen_runs()), key=len)
    every = "data.db_ids=() loads every database; " if not cfg.data.get("db_ids") else ""
    raise ConfigError(
        f"{', '.join(reported)} {'is' if len(reported) == 1 else 'are'} in the report pool "
        f"(fixed {pools.FIXED_ON}, countermem_jax/protocol/pools.py), which only the frozen "
        f"replication reads ({FROZEN}); {every}this config differs from it in "
        f"{len(nearest)} field(s): {'; '.join(nearest[:_SHOWN])}"
        + ("; ..." if len(nearest) > _SHOWN else "")
        + f"; tune on {', '.join(pools.tuning_pool(benchmark))}")
