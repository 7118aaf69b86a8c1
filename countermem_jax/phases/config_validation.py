"""Refuses a bad experiment config before any task, model or artefact is touched."""
import math
import numbers

import ml_collections

from countermem_jax import baselines, domains
from countermem_jax.method.counterfactual import CORRECTION_MODES
from countermem_jax.method.memory_use import REVISIONS
from countermem_jax.method.memory import retention
from countermem_jax.method.retrieval.retrieve import INTERVENTIONS
from countermem_jax.method.selector import features
from countermem_jax.runtime.errors import UserError


class ConfigError(UserError, ValueError):
    """A config field has a value the pipeline cannot run with; the message names the field."""


BENCHMARKS = domains.BENCHMARKS.keys()  # the registry, live: benchmarks registered later count
AGENTS = ("react", "reflexion")
BACKBONES = ("llama_cpp", "openai")
FIXED_SELECTORS = ("always_skip", "always_top1", "relevance_threshold")

# dotted field -> allowed values
CHOICES = {
    "method": tuple(baselines.METHODS),  # paper Table 1 rows (countermem_jax/baselines)
    "data.benchmark": BENCHMARKS,
    "agent.kind": AGENTS,
    "backbone.kind": BACKBONES,
    "memory.retention": retention.RULES,
    "memory.unknown_condition": ("include", "exclude"),
    "memory.revision": REVISIONS,                       # §3.4: who adapts a selected record
    "construction.reuse_policy": FIXED_SELECTORS,
    "eval.selector": ("dqn",) + FIXED_SELECTORS,
    "construction.corrections": CORRECTION_MODES,      # §6.1 component ablation
    "eval.retrieval_intervention": INTERVENTIONS,      # §6.2 retrieval ablation
}
# dotted field -> (smallest, largest or None) for integers
INT_RANGES = {
    "splits.n_build": (0, None), "splits.n_train": (0, None), "splits.n_validation": (0, None),
    "splits.n_eval": (0, None), "splits.seed": (0, None), "splits.folds": (0, None),
    "agent.max_attempts": (1, None), "agent.token_budget": (1, None), "agent.max_tokens": (1, None),
    "memory.capacity": (1, None), "memory.suppress_after_uses": (0, None), "memory.top_k": (1, features.NUM_SLOTS),
    "construction.k": (1, None), "construction.max_expanded_failures": (0, None),
    "construction.verification_budget": (0, None), "construction.wave_size": (0, None),
    "construction.transfer_checks": (0, None),
    "selector.total_decisions": (1, None), "selector.learning_starts": (0, None),
    "selector.train_every": (1, None), "selector.target_sync_every": (1, None),
    "selector.checkpoint_every": (1, None), "selector.batch_size": (1, None),
    "selector.wave_size": (1, None),
    "eval.concurrency": (1, None),
    "backbone.n_ctx": (1, None), "backbone.max_concurrency": (1, None),
    "backbone.max_attempts": (1, None), "data.generated_per_family": (1, None),
    "selector.dqn.replay_capacity": (1, None),
    "backbone.max_tokens_on_truncation": (0, None),
}
# dotted field -> (smallest, largest) for real numbers (finite, within the bounds)
REAL_RANGES = {
    "construction.epsilon": (0.0, 1.0), "agent.temperature": (0.0, 2.0),
    "backbone.repetition_penalty_on_truncation": (1.0, 2.0),
    "memory.reuse_weight": (-math.inf, math.inf), "memory.suppress_below": (-1.0, 1.0),
    "construction.relevance_threshold": (-math.inf, math.inf),
    "eval.relevance_threshold": (-math.inf, math.inf),
    "backbone.timeout_s": (0.0, math.inf), "data.check_timeout_s": (0.0, math.inf),
    "memory.reuse_rho": (0.0, 1.0), "memory.admission.threshold": (-math.inf, math.inf),
    "selector.dqn.learning_rate": (0.0, math.inf), "selector.dqn.gamma": (0.0, 1.0),
    "selector.dqn.epsilon_start": (0.0, 1.0), "selector.dqn.epsilon_end": (0.0, 1.0),
    "selector.dqn.exploration_fraction": (0.0, 1.0), "selector.reward.token_scale": (0.0, math.inf),
}

# Marks a field the config does not have (distinct from a field set to None).
_ABSENT = object()


def lookup(cfg, dotted: str):
    """The value at ``dotted`` ("memory.retention") or ``_ABSENT``."""
    node = cfg
    for part in dotted.split("."):
        try:
            node = node[part]
        except (KeyError, TypeError, AttributeError):
            return _ABSENT
    return node


def _problems(cfg):
    """Yields one message per bad field: choices, integer ranges (bools are not integers here), and
    finite real ranges, then the selector-seed rules. All problems are collected, so one run of
    the binary reports every mistake in the config at once.
    """
    for field, allowed in CHOICES.items():
        value = lookup(cfg, field)
        if value is not _ABSENT and value not in allowed:
            yield f"{field}={value!r} is not one of: {', '.join(allowed)}"
    for field, (low, high) in INT_RANGES.items():
        value = lookup(cfg, field)
        if value is _ABSENT:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            yield f"{field}={value!r} must be an integer"
        elif value < low or (high is not None and value > high):
            yield f"{field}={value} must be " + (f">= {low}" if high is None else
                                                f"between {low} and {high}")
    for field, (low, high) in REAL_RANGES.items():
        value = lookup(cfg, field)
        if value is _ABSENT:
            continue
        if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                or not math.isfinite(value)):
            yield f"{field}={value!r} must be a finite number"
        elif not low <= value <= high:
            yield f"{field}={value} must lie in [{low}, {high}]"
    yield from _selector_seed_problems(cfg)


def _selector_seed_problems(cfg):
    """``selector.seeds`` must be distinct non-negative integers (one selector per seed, Appendix
    C.2 uses 0–4), and ``eval.seeds`` may only name seeds that were trained.
    """
    seeds = lookup(cfg, "selector.seeds")
    if seeds is _ABSENT:
        return
    if (isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__") or not seeds or
            any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0
                for s in seeds)):
        yield f"selector.seeds={seeds!r} must be a non-empty list of integers >= 0"
        return
    if len(set(seeds)) != len(seeds):
        yield f"selector.seeds={tuple(seeds)} repeats a seed"
    chosen = lookup(cfg, "eval.seeds")
    if lookup(cfg, "eval.selector") != "dqn" or chosen is _ABSENT or not chosen:
        return  # () evaluates every trained seed
    untrained = [s for s in chosen if s not in seeds]
    if untrained:
        yield (f"eval.seeds={tuple(chosen)} names seed(s) {tuple(untrained)} that are not in "
               f"selector.seeds {tuple(seeds)}")


def validate(cfg) -> None:
    """Raises ``ConfigError`` listing, on one line, every field the pipeline cannot run with."""
    problems = list(_problems(cfg))
    if problems:
        raise ConfigError("bad config: " + "; ".join(problems))


def check_split_sizes(cfg, splits, num_tasks: int) -> None:
    """Every split got the number of tasks the config asks for (a manifest fixes them itself)."""
    if lookup(cfg, "splits.manifest"):
        return
    short = []
    for name in ("build", "train", "validation", "eval"):
        wanted, got = cfg.splits[f"n_{name}"], len(getattr(splits, name))
        if name == "build":  # D.2: drawn from the whole pool, then what evaluation shares removed
            got = splits.info.get("build_drawn", got)
        if got < wanted:
            short.append(f"splits.n_{name}={wanted} but only {got} task(s) can be drawn")
    if short:
        raise ConfigError(f"bad config: {'; '.join(short)} from the {num_tasks} tasks of "
                          f"{cfg.data.benchmark} (lower the sizes: evaluation tasks are kept apart "
                          "from all others, validation tasks from training tasks)")


def apply_overrides(cfg, overrides, where: str, error=ConfigError, prefix: str = "") -> None:
    """Sets every leaf of the nested ``overrides`` (a dict or ConfigDict: a study variant's or a
    sweep's) on ``cfg``; a list becomes a tuple, as configs declare sequences. A field ``cfg``
    does not declare is ``error("<where>: the run config has no field '<path>'")``, raised
    before anything runs."""
    for key, value in (overrides.items() if overrides is not None else ()):
        path = f"{prefix}{key}"
        if key not in cfg:
            raise error(f"{where}: the run config has no field {path!r}")
        if isinstance(value, (dict, ml_collections.ConfigDict)) and \
                isinstance(cfg[key], ml_collections.ConfigDict):
            apply_overrides(cfg[key], value, where, error, path + ".")
        else:
            cfg[key] = tuple(value) if isinstance(value, list) else value
