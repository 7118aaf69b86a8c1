"""Every study config's smallest command (the one on the CPU backbone, ``:cpu`` or ``,cpu``)
passes the config validation it would meet when run here, including the split sizes its protocol
needs on the shipped data (``COUNTERMEM_DATA``)."""
import ast
import importlib.util
import os
import pathlib
import re
import shlex

import pytest

from countermem_jax.runtime import paths

from countermem_jax.phases import config_validation
from countermem_jax import domains
from countermem_jax.phases import context
from countermem_jax.studies import cells, grid, runner

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs" / "studies").glob("*.py"))


def small_commands(path):
    """The study commands of ``path``'s docstring whose config argument names the CPU backbone."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = re.sub(r"\\\n\s*", " ", module.__doc__)
    out = []
    for line in text.splitlines():
        if "python -m countermem_jax.study " not in line:
            continue
        argv = shlex.split(line.strip())
        config = next(a for a in argv if a.startswith("--config="))[len("--config="):]
        arg = config.split(":", 1)[1] if ":" in config else None
        if arg and "cpu" in arg.split(","):
            overrides = dict(a[len("--config."):].split("=", 1) for a in argv
                             if a.startswith("--config."))
            out.append((module, arg, overrides))
    return out


def _value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _splits(cfg, benchmark=None, **overrides):
    cfg = cells.setting_config(cfg, benchmark or cfg.data.benchmark, **overrides)
    tasks = domains.load_benchmark(cfg.data)[0]
    sp = context.draw_splits(cfg, tasks)
    config_validation.check_split_sizes(cfg, sp, len(tasks))
    return sp


def validate(study):
    """The checks the study binary makes before any model call, data-dependent ones included."""
    if "grid" in study:
        return grid.setting_configs(study)
    if "variants" in study:
        return runner.variant_configs(study)
    config_validation.validate(study.base)
    p = study.protocol
    if study.study == "accumulation":
        build = _splits(study.base).build
        assert max(p.checkpoints) <= len(build), (max(p.checkpoints), len(build))
        assert 0 < p.regression_tasks <= max(p.checkpoints)
    elif study.study in ("rescued", "breakdown", "budget"):
        for bench in p.benchmarks:
            _splits(study.base, bench, **({"splits.n_eval": p.n_paired}
                                          if study.study == "rescued" else {}))
    else:
        _splits(study.base)


def test_every_config_states_a_small_command():
    assert all(small_commands(path) for path in CONFIGS), \
        [p.name for p in CONFIGS if not small_commands(p)]


@pytest.mark.skipif(not (paths.data_root() / "spider").exists() or
                    not (paths.data_root() / "satlib").exists(),
                    reason="needs the shipped Spider and SATLIB data")
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_small_command_passes_validation(path):
    for module, arg, overrides in small_commands(path):
        study = module.get_config(arg)
        study.update_from_flattened_dict({k: _value(v) for k, v in overrides.items()})
        validate(study)


def test_request_bounds_count_shared_phases_once():
    from countermem_jax.studies import cost
    spec = importlib.util.spec_from_file_location("r", ROOT / "configs/studies/retrieval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    study = module.get_config()
    one = cost.phase_requests(runner.variant_configs(study)["matched"])
    total = cost.study_requests(study)
    # four interventions on one store: one build, one selector, one base run, four memory runs
    assert total["build"] == one["build"] and total["selector"] == one["selector"]
    assert total["memory_runs"] == 4 * one["memory_runs"]
