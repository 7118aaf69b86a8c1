"""Every config entry point resolved to JSON: the files of ``configs/`` (each argument they
take), the run configs of the sweeps and studies, the settings the studies' cells move to.
``tests/test_config_snapshot.py`` compares them with ``tests/fixtures/config_snapshot.json.gz``;
``PYTHONPATH=. python tests/config_snapshot.py`` (from the repository root) rewrites that file.
The fixture was written before the values moved from the library into ``configs/``; study configs
have since gained the ``settings`` their cells read, which the comparison leaves out.
"""
import gzip
import importlib.util
import json
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "config_snapshot.json.gz"
AGENTS, BACKBONES, VARIANTS = ("react", "reflexion"), ("gptoss", "api", "cpu"), ("dbsplit",)
# the registry's own benchmarks (tests register more), the paper's twelve first
PAPER_BENCHMARKS = ("minif2f", "proofnet", "amber", "swebench", "bugsinpy", "dafnybench",
                    "vericoding_dafny", "vericoding_verus", "spider", "bird", "smtlib", "satlib")
BENCHMARKS = PAPER_BENCHMARKS + ("quixbugs", "sat_encoding", "smt_encoding")
BAD_PAPER_ARGS = ("", "spider", "spider,react", "foo,react,gptoss", "spider,foo,gptoss",
                  "spider,react,foo", "bird,react,cpu", "spider,react,gptoss,foo",
                  "spider,react,gptoss,dbsplit,x")
STUDY_ARGS = (None, "cpu", "cpu,reflexion", "cpu,small", "gptoss", "bird,reflexion,api",
              "satlib", "four_domains", "four_domains,cpu", "four_domains,api")
REHEARSAL_ARGS = ("gptoss", "api", "gptoss,small", "api,small", "cpu")


def _json(cfg):
    return json.loads(cfg.to_json_best_effort(sort_keys=True))


def _load(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(f"snapshot_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _resolve(out: dict, key: str, make):
    """``out[key]``: the config ``make()`` returns as JSON, or the error it raises."""
    try:
        out[key] = _json(make())
    except Exception as err:   # noqa: BLE001 -- a refused argument is part of the snapshot
        out[key] = {"error": f"{type(err).__name__}: {err}"}
    return out[key]


def _study_runs(out: dict, key: str, study):
    """The run configs a study config makes: its variants (per setting for a four-domain
    study) or, for a protocol study, its base moved to each paper setting and agent."""
    from countermem_jax.studies import cells, grid, runner
    if "grid" in study:
        for (bench, agent), sub in grid.setting_configs(study).items():
            for name, cfg in runner.variant_configs(sub).items():
                out[f"{key} setting {bench},{agent} variant {name}"] = _json(cfg)
    elif "variants" in study:
        for name, cfg in runner.variant_configs(study).items():
            out[f"{key} variant {name}"] = _json(cfg)
    else:
        # a study that moves no cell (the replication) carries no settings: probe with the paper's
        settings = study.get("settings") or _load(ROOT / "configs" / "paper.py").settings()
        for bench in PAPER_BENCHMARKS:
            for agent in AGENTS:
                out[f"{key} cell {bench},{agent}"] = _json(
                    cells.setting_config(study.base, bench, settings,
                                        **{"agent.kind": agent}))


def resolve_all() -> dict:
    """{entry point: its config as JSON (or {"error": ...})}; run from the repository root."""
    from countermem_jax.sweep import spec
    os.environ.pop("COUNTERMEM_REHEARSAL_API_URL", None)
    out = {}
    for path in sorted((ROOT / "configs").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        module = _load(path)
        if rel == "configs/paper.py":
            args = [f"{b},{a},{k}" for b in BENCHMARKS for a in AGENTS
                    for k in BACKBONES]
            args += [f"{b},{a},{k},{v}" for b in BENCHMARKS for a in AGENTS
                     for k in BACKBONES for v in VARIANTS]
            for arg in (*args, *BAD_PAPER_ARGS):
                _resolve(out, f"{rel}:{arg}", lambda arg=arg: module.get_config(arg))
            _resolve(out, rel, module.get_config)
        elif rel == "configs/rehearsal/spider.py":
            for arg in REHEARSAL_ARGS:
                _resolve(out, f"{rel}:{arg}", lambda arg=arg: module.get_config(arg))
        elif rel.startswith("configs/studies/"):
            for arg in STUDY_ARGS:
                key = f"{rel}:{arg}" if arg else rel
                if "error" not in _resolve(out, key, lambda arg=arg: module.get_config(arg)):
                    try:
                        _study_runs(out, key, module.get_config(arg))
                    except Exception as err:   # noqa: BLE001 -- refused at run time
                        out[f"{key} runs"] = {"error": f"{type(err).__name__}: {err}"}
        elif rel.startswith("configs/sweeps/"):
            sweep = module.get_config()
            out[rel] = _json(sweep)
            for cell in spec.cells(sweep):
                out[f"{rel} cell {cell.benchmark},{cell.agent},{cell.backbone},{cell.variant},"
                    f"{cell.method}"] = _json(cell.config)
        else:
            _resolve(out, rel, module.get_config)
    return out


def read_fixture() -> dict:
    return json.loads(gzip.decompress(FIXTURE.read_bytes()))


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    snapshot = resolve_all()
    FIXTURE.write_bytes(gzip.compress(json.dumps(snapshot, sort_keys=True).encode(), mtime=0))
    print(f"{len(snapshot)} entry points -> {FIXTURE}")
