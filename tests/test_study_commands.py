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
from helpers import config_module, cpu_config

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


def _splits(cfg, benchmark=None, settings=None, **overrides):
    cfg = cells.setting_config(cfg, benchmark or cfg.data.benchmark, settings, **overrides)
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
            _splits(study.base, bench, study.get("settings"),
                    **({"splits.n_eval": p.n_paired} if study.study == "rescued" else {}))
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


def _tiny(name, **protocol):
    """Protocol study ``name`` small enough to count by hand. Per task, with ReAct and 2
    attempts: base agent 2 calls (a draft each); CounterMem memory run 2 x (draft, revision,
    top_k=1 judgement) = 6; construction 6 + 1 expansion (K=2 alternatives call) + min(1 x 2,
    budget 4) = 2 distillations = 9; ReasoningBank run 2 x (draft, memory revision) = 4, build
    4 + judge + extract = 6. Selector, one seed: 4 decisions + 1 past the end (the last episode
    finishes) = 5 x 3 calls, and 5 // 2 + 1 = 3 validations of the 1 validation task x 6 = 18;
    33 in all. Splits: 4 construction, 2 training, 1 validation, 3 held-out tasks."""
    from countermem_jax.studies import protocols
    study = protocols.paper_study(name, cpu_config(), config_module("paper.py").settings(),
                                  **protocol)
    study.base.update_from_flattened_dict({
        "agent.max_attempts": 2, "memory.top_k": 1, "construction.k": 2,
        "construction.max_expanded_failures": 1, "construction.verification_budget": 4,
        "selector.total_decisions": 4, "selector.checkpoint_every": 2, "selector.wave_size": 1,
        "selector.seeds": (0,), "splits.n_build": 4, "splits.n_train": 2,
        "splits.n_validation": 1, "splits.n_eval": 3})
    return study


def _bound(study):
    from countermem_jax.studies import protocol_cost
    return protocol_cost.requests(study)


def test_accumulation_bound_counts_prefix_builds_and_shared_base_runs_once():
    out = _bound(_tiny("accumulation", checkpoints=(0, 2, 4), orderings=2, ordering_seed=0,
                       methods=("countermem", "reasoningbank"), regression_tasks=2))
    # build: per ordering the longest prefix, 4 x 9 + 4 x 6 = 60, x 2 orderings = 120
    # selector: trained once, 33
    # base: the held-out run 3 x 2 = 6 once, each ordering's 2 earlier tasks 2 x 2 = 4 -> 14
    # memory, per ordering: CounterMem 3 snapshots x 3 x 6 + 2 snapshots (n >= 2) x 2 x 6 = 78,
    #   ReasoningBank 3 x 3 x 4 + 2 x 2 x 4 = 52; 130 x 2 orderings = 260
    assert out["total"] == 120 + 33 + 14 + 260 == 427
    # without the cache: prefixes 0+2+4 = 6 tasks per ordering (6 x 15 x 2 = 180), 12 held-out
    # base runs (72) and 8 earlier-task base runs (32)
    assert out["without_cache"] == 180 + 33 + 72 + 32 + 260 == 577


def test_transfer_bound_counts_lookalike_generation_and_pair_runs():
    out = _bound(_tiny("transfer", methods=("countermem", "reasoningbank"), n_pairs=2,
                       pair_seed=0))
    # build 4 x 9 + 4 x 6 = 60; selector 33; one look-alike call per record, at most
    # min(capacity 200, 4 tasks x 2 distillations) = 8; 4 conditions x 2 pairs: no memory
    # 2 calls (16), CounterMem 6 and ReasoningBank 4 (80)
    assert out["other"] == 8
    assert out["total"] == out["without_cache"] == 60 + 33 + 8 + 16 + 80 == 197


def test_rescued_bound_uses_each_benchmarks_split_sizes():
    out = _bound(_tiny("rescued", benchmarks=("spider", "satlib"),
                       methods=("countermem", "reasoningbank"), n_paired=3))
    # spider (the study's sizes): CounterMem 36 + 33 + 6 + 3 x 6 = 93, ReasoningBank 24 + 3 x 4
    #   = 36 (its base run is CounterMem's) -> 129
    # satlib (its setting: 30 construction, 10 validation tasks; 3 paired): CounterMem 30 x 9
    #   + (15 + 3 x 10 x 6) + 6 + 18 = 489, ReasoningBank 30 x 6 + 12 = 192 -> 681
    assert out["total"] == 129 + 681 == 810
    assert out["without_cache"] == 810 + 2 * 6


def test_budget_bound_counts_the_probe_and_every_held_out_task():
    out = _bound(_tiny("budget", benchmarks=("spider",),
                       methods=("reasoningbank", "reasoningbank_matts",
                                "reasoningbank_verified", "countermem"),
                       token_budget=1000, construction_fraction=0.5))
    # builds (the prefix replays the probe): ReasoningBank 4 x 6 = 24, MaTTS 4 x (3 rollouts x
    # (4 + judge) + contrast) = 64, verified 4 x (4 + 1) = 20, CounterMem 36 -> 144
    # selector 33; base 6 (shared); memory 3 x 4 x 3 baselines + 3 x 6 = 54
    assert out["total"] == 144 + 33 + 6 + 54 == 237
    assert out["without_cache"] == 2 * 144 + 33 + 4 * 6 + 54 == 399


def test_breakdown_bound_runs_every_agent_on_every_benchmark():
    out = _bound(_tiny("breakdown", benchmarks=("spider",), agents=("react", "reflexion")))
    # react: 36 + 33 + 6 + 18 = 93. reflexion adds a reflection after the first failed
    # attempt: task 2 x 3 + 1 = 7, build 4 x (7 + 3) = 40, selector 5 x 4 + 3 x 1 x 7 = 41,
    # base 3 x (2 + 1) = 9, memory 3 x 7 = 21 -> 111
    assert out["total"] == out["without_cache"] == 93 + 111 == 204


def test_study_cost_command_prints_a_protocol_studys_bound():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "countermem_jax.study_cost",
                          f"--config={ROOT}/configs/studies/transfer.py"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "without_cache" in out and "27,600" in out, out


def _study_lines(text):
    """The ``countermem_jax.study`` commands of ``text``, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", text)
    return {" ".join(line.split()) for line in text.splitlines()
            if line.strip().startswith("python -m countermem_jax.study ")}


def test_docs_list_every_config_docstrings_commands():
    docs = _study_lines((ROOT / "docs" / "studies.md").read_text(encoding="utf-8"))
    for path in CONFIGS:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        missing = _study_lines(module.__doc__) - docs
        assert not missing, (path.name, missing)
