"""From a sweep config to the per-run configs of its grid.

A sweep config (``configs/sweeps/<name>.py``, an ``ml_collections`` config file) names the axes —
``benchmarks``, ``agents``, ``backbones``, ``methods``, ``seeds`` and study ``variants`` — and how
the config of one run is made: ``run_config``, a path template such as
``configs/paper.py:{benchmark},{agent},{backbone}`` (a ``FILE.py:ARG`` suffix passes ARG, also
formatted, to the file's ``get_config``), then ``overrides`` (nested dicts, applied to every
run), then the variant's overrides, then ``method`` and ``selector.seeds`` from the axes. An
override naming a field the run config does not declare is refused with one line naming it (the
run configs are locked, like the binaries' ``--config.*`` overrides).

Only this module knows the sweep config's fields; ``graph.py`` turns the cells into phase runs.
"""
import copy
import dataclasses
import itertools
import json
import pathlib

import ml_collections

from countermem_jax import baselines
from countermem_jax.protocol import config_files
from countermem_jax.phases import config_fingerprint, config_validation


class SweepError(ValueError):
    """The sweep cannot start: a bad sweep config, an unknown field, an infeasible resource."""


PHASES = ("build_memory", "train_selector", "evaluate")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One point of the grid: its axes and its finished per-run config (locked)."""
    benchmark: str
    agent: str
    backbone: str
    variant: str
    method: str
    seeds: tuple[int, ...]
    config: ml_collections.ConfigDict


def default_sweep() -> ml_collections.ConfigDict:
    """Every field a sweep config has, with its default; configs/sweeps/*.py set the axes."""
    c = ml_collections.ConfigDict()
    c.root = "runs/sweeps/sweep"                # workdirs go under it: a path every host mounts
    c.benchmarks = ("spider",)
    c.agents = ("react",)
    c.backbones = ("gptoss",)
    c.methods = ("countermem",)
    c.seeds = (0,)
    # the per-run config: a file template, FILE.py or FILE.py:ARG (ARG goes to get_config)
    c.run_config = "configs/paper.py:{benchmark},{agent},{backbone}"
    c.overrides = ml_collections.ConfigDict()   # nested fields applied to every run
    c.variants = ml_collections.ConfigDict({"main": {}})   # study name -> nested overrides
    # LLM slots a phase run reserves (= its concurrency); 0: what the run can use (usable_slots:
    # an evaluation at most its tasks x runs, a build at most its wave and its tasks, selector
    # training its wave); a fingerprinted field (it changes results) always keeps the run
    # config's value.
    c.llm_slots = ml_collections.ConfigDict(dict(build_memory=0, train_selector=0, evaluate=0))
    # Requests in flight to hosted APIs (the api backbone), all runs of the sweep together, on
    # the whole cluster; each hosted run takes at most this many (0: no cap). Our choice: two
    # of the api config's runs (8 each) at a time; set it to what your API key allows.
    c.hosted_slots = 16
    c.cpus = ml_collections.ConfigDict(dict(build_memory=2.0, train_selector=1.0, evaluate=2.0))
    c.max_retries = 2                           # Ray retries of a dead worker / transient error
    c.urls_env = "COUNTERMEM_LLM_URLS"          # node-local LLM URLs (launch/ray_cluster.sh)
    c.imports = ()                              # modules imported first (extra benchmarks)
    c.progress_every_s = 30.0
    c.report = True
    c.report_dir = ""                           # default ROOT/report
    return c


def load_config_file(spec: str, **fmt) -> ml_collections.ConfigDict:
    """``FILE.py`` or ``FILE.py:ARG`` (formatted with ``fmt``) -> the file's ``get_config(...)``."""
    spec = spec.format(**fmt)
    path = spec.partition(":")[0]
    if not pathlib.Path(path).is_file():
        raise SweepError(f"run config {path} does not exist (from run_config={spec!r})")
    try:
        return config_files.load(spec)
    except config_files.SettingError as err:   # configs/paper.py refusing its argument
        raise SweepError(str(err)) from None


def _axis(sweep, name: str) -> tuple:
    values = tuple(sweep.get(name) or ())
    if not values:
        raise SweepError(f"sweep.{name} is empty: name at least one")
    return values


def cells(sweep) -> list[Cell]:
    """Every (benchmark, agent, backbone, variant, method) of the sweep with its run config."""
    variants = sweep.get("variants") or {"main": {}}
    seeds = tuple(int(s) for s in _axis(sweep, "seeds"))
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise SweepError(f"sweep.seeds={seeds}: give distinct seeds >= 0")
    for method in _axis(sweep, "methods"):
        if method not in baselines.METHODS:
            raise SweepError(f"sweep.methods: unknown method {method!r}; expected one of "
                             f"{', '.join(baselines.METHODS)}")
    out = []
    for benchmark, agent, backbone in itertools.product(
            _axis(sweep, "benchmarks"), _axis(sweep, "agents"), _axis(sweep, "backbones")):
        base = load_config_file(sweep.run_config, benchmark=benchmark, agent=agent,
                                backbone=backbone)
        config_validation.apply_overrides(base, sweep.get("overrides"), "sweep.overrides",
                                          SweepError)
        for variant, method in itertools.product(variants, _axis(sweep, "methods")):
            cfg = copy.deepcopy(base)
            config_validation.apply_overrides(cfg, variants[variant], f"sweep.variants.{variant}",
                                              SweepError)
            cfg.method = method
            cfg.selector.seeds = seeds
            cfg.eval.seeds = ()
            out.append(Cell(benchmark, agent, backbone, variant, method, seeds, cfg))
    return out


# The config field that sets each phase's concurrency.
CONCURRENCY = {"evaluate": ("eval", "concurrency"), "build_memory": ("construction", "wave_size"),
               "train_selector": ("selector", "wave_size")}


def slots_for(sweep, cfg, phase: str) -> int:
    """LLM slots a phase run of ``cfg`` reserves, which is also its concurrency: the sweep's
    ``llm_slots.<phase>`` when > 0, else what the run can use (``usable_slots``). A concurrency
    field that is fingerprinted (it changes results, e.g. selector waves) is never changed by
    the sweep: the run config's value is what the run reserves."""
    section, name = CONCURRENCY[phase]
    defining = {**config_fingerprint.fingerprint_fields(cfg, "build_memory"),
                **config_fingerprint.fingerprint_fields(cfg, "train_selector")}
    if f"{section}.{name}" in defining:
        return max(1, int(cfg[section][name] or 1))
    given = int((sweep.get("llm_slots") or {}).get(phase, 0) or 0)
    return given if given > 0 else usable_slots(cfg, phase)


def _split_size(cfg, split: str) -> int | None:
    """Tasks of ``split`` ("build", "eval"): the manifest's list when the config names one
    (None if it cannot be read here), else ``splits.n_<split>``."""
    manifest = cfg.splits.get("manifest")
    if not manifest:
        return int(cfg.splits[f"n_{split}"])
    try:
        return len(json.loads(pathlib.Path(manifest).read_text())[split])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def eval_runs(cfg) -> int:
    """Requests in flight per task of one of the sweep's evaluation runs: the base agent's run
    and the method's (CounterMem with the trained selector: one seed per evaluation run; none
    for "none"; Best-of-N draws its K extra candidates at once)."""
    if cfg.method == "best_of_n":
        return 1 + int(cfg.baselines.best_of_n.k)
    return 1 + (cfg.method != "none")


def usable_slots(cfg, phase: str) -> int:
    """What a phase run of ``cfg`` can keep in flight, one request per task or episode: an
    evaluation at most its tasks x runs, within ``eval.concurrency``; a CounterMem build at most
    its construction tasks, within its wave size (0: the client's cap ``backbone.max_concurrency``,
    what the phase itself would resolve it to), a baseline's build 1; selector training its
    wave."""
    if phase == "train_selector":
        return max(1, int(cfg.selector.wave_size or 1))
    if phase == "evaluate":
        tasks, own = _split_size(cfg, "eval"), int(cfg.eval.concurrency or 1)
        return max(1, own if tasks is None else min(own, tasks * eval_runs(cfg)))
    if cfg.method != "countermem":   # a baseline builds its memory one task at a time
        return 1
    wave = int(cfg.construction.wave_size) or int(cfg.backbone.get("max_concurrency") or 1)
    tasks = _split_size(cfg, "build")
    return max(1, wave if tasks is None else min(wave, tasks))


def hosted_slots(sweep, cfg, slots: int) -> int:
    """The slots a run on a hosted API takes of the sweep's cluster-wide ``hosted_slots``: its
    own, at most the cap (0: no cap; then it takes none)."""
    cap = int(sweep.get("hosted_slots", 0) or 0)
    return min(slots, cap) if cap > 0 else 0


def with_slots(cfg, build: int, train: int, evaluate: int) -> ml_collections.ConfigDict:
    """A copy of ``cfg`` whose concurrency matches the reserved slots. The build and training
    wave sizes are set in every phase's config of a workdir alike (a phase checks the earlier
    phases' fingerprints); the client's own cap, ``backbone.max_concurrency``, is set per phase
    run by ``for_phase``."""
    cfg = copy.deepcopy(cfg)
    cfg.construction.wave_size = build
    cfg.selector.wave_size = train
    cfg.eval.concurrency = evaluate
    return cfg


def for_phase(cfg, slots: int, **fields) -> ml_collections.ConfigDict:
    """A copy of ``cfg`` for one phase run: the client never has more than ``slots`` requests in
    flight; ``fields`` are dotted paths set on the copy (e.g. ``selector__seeds``)."""
    cfg = copy.deepcopy(cfg)
    cfg.backbone.max_concurrency = slots
    for dotted, value in fields.items():
        section, name = dotted.split("__")
        cfg[section][name] = value
    return cfg
