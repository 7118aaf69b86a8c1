"""Bad configs are refused before anything is loaded, naming the field and what is allowed."""
import importlib.util
import pathlib
import re

import pytest

from countermem_jax.phases import config_validation
from countermem_jax import experiment
from countermem_jax.phases import context as phase_context
from helpers import default_config
from countermem_jax.phases.config_validation import ConfigError
from test_pipeline import people_benchmark  # noqa: F401 (fixture)

CONFIGS = sorted((pathlib.Path(__file__).parent.parent / "configs").glob("*.py"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_is_valid(path):
    """Each file's default; every argument of configs/paper.py is checked in test_configs."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config_validation.validate(module.get_config())


@pytest.mark.parametrize("field, value, message", [
    ("memory.retention", "lru",
     "memory.retention='lru' is not one of: utility, recency, random, similarity"),
    ("construction.reuse_policy", "sometimes", "construction.reuse_policy='sometimes' is not one "
     "of: always_skip, always_top1, relevance_threshold"),
    ("eval.selector", "best", "eval.selector='best' is not one of: dqn, always_skip"),
    ("agent.kind", "toolformer", "agent.kind='toolformer' is not one of: react, reflexion"),
    ("data.benchmark", "imagenet", "data.benchmark='imagenet' is not one of: minif2f, proofnet"),
    ("backbone.kind", "gpt", "backbone.kind='gpt' is not one of: llama_cpp, openai"),
    ("memory.unknown_condition", "maybe", "is not one of: include, exclude"),
    ("splits.n_build", -1, "splits.n_build=-1 must be >= 0"),
    ("splits.n_eval", -5, "splits.n_eval=-5 must be >= 0"),
    ("agent.max_attempts", 0, "agent.max_attempts=0 must be >= 1"),
    ("memory.top_k", 5, "memory.top_k=5 must be between 1 and 4"),
    ("selector.batch_size", 0, "selector.batch_size=0 must be >= 1"),
    ("selector.wave_size", 0, "selector.wave_size=0 must be >= 1"),
    ("construction.epsilon", float("nan"), "construction.epsilon=nan must be a finite number"),
    ("construction.epsilon", 1.5, "construction.epsilon=1.5 must lie in [0.0, 1.0]"),
    ("selector.seeds", (), "selector.seeds=() must be a non-empty list"),
    ("selector.dqn.learning_rate", -1e-3, "selector.dqn.learning_rate=-0.001 must lie in [0.0"),
    ("selector.dqn.gamma", 1.5, "selector.dqn.gamma=1.5 must lie in [0.0, 1.0]"),
    ("selector.dqn.replay_capacity", 0, "selector.dqn.replay_capacity=0 must be >= 1"),
    ("memory.reuse_rho", 2.0, "memory.reuse_rho=2.0 must lie in [0.0, 1.0]"),
    ("selector.seeds", (0, 0), "selector.seeds=(0, 0) repeats a seed"),
    ("eval.seeds", (0, 7), "eval.seeds=(0, 7) names seed(s) (7,) that are not in selector.seeds "
     "(0, 1, 2, 3, 4)"),
])
def test_bad_field_is_named_with_the_allowed_values(field, value, message):
    cfg = default_config()
    *sections, key = field.split(".")
    node = cfg
    for section in sections:
        node = node[section]
    node[key] = value
    with pytest.raises(ConfigError) as err:
        config_validation.validate(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_all_problems_are_listed_on_one_line():
    cfg = default_config()
    cfg.memory.retention = "lru"
    cfg.splits.n_train = -2
    with pytest.raises(ConfigError) as err:
        config_validation.validate(cfg)
    assert str(err.value).startswith("bad config: ") and "memory.retention" in str(err.value)
    assert "splits.n_train=-2" in str(err.value) and "\n" not in str(err.value)


def _no_backbone(*args, **kwargs):
    raise AssertionError("the backbone was created before the split sizes were checked")


@pytest.mark.parametrize("sizes, message", [
    # D.2: construction is drawn from the whole pool (evaluation's share removed afterwards), so
    # only more construction tasks than the benchmark has are refused.
    (dict(n_build=8), "splits.n_build=8 but only 7 task(s) can be drawn from the 7 tasks of "
                      "spider"),
    (dict(n_train=5), "splits.n_train=5 but only 4 task(s) can be drawn"),
])
def test_splits_larger_than_the_data_are_refused_before_the_backbone(
        tmp_path, people_benchmark, monkeypatch, sizes, message):
    monkeypatch.setattr(phase_context, "make_backbone", _no_backbone)
    cfg = default_config()
    cfg.splits.update(n_build=2, n_train=2, n_validation=1, n_eval=2)
    cfg.splits.update(**sizes)
    with pytest.raises(ConfigError, match=re.escape(message)):
        experiment.build_memory(cfg, tmp_path / "wd", benchmark=people_benchmark)
    # a run refused before it wrote anything leaves nothing: no fingerprint, splits.json, store,
    # lock, nor the workdir it made
    assert not (tmp_path / "wd").exists()
