"""Sweep configs and result readers shared by tests/test_sweep.py and tests/test_sweep_ray.py."""
import json
import pathlib

import sweep_fixture
from countermem_jax.method.memory import load_frozen

FIXTURE = pathlib.Path(sweep_fixture.__file__)
SWEEP_FILE = '''"""Test sweep: {benchmarks} x {methods} x seeds {seeds}."""
from countermem_jax.sweep.spec import default_sweep


def get_config():
    c = default_sweep()
    c.root = {root!r}
    c.benchmarks = {benchmarks!r}
    c.agents = ("react",)
    c.backbones = ("scripted",)
    c.methods = {methods!r}
    c.seeds = {seeds!r}
    c.run_config = {run_config!r}
    c.overrides = {{"data": {{"data_dir": {data!r}}}, "splits": {{"manifest": {manifest!r}}}}}
    c.imports = ("sweep_fixture",)
    c.cpus.update(build_memory=1.0, train_selector=1.0, evaluate=1.0)
    c.max_retries = 2
    c.progress_every_s = 2.0
    c.report = False
    return c
'''


def write_sweep(tmp: pathlib.Path, root: pathlib.Path, benchmarks=("sweep_people", "sweep_pets"),
                methods=("countermem", "none"), seeds=(0, 1)) -> pathlib.Path:
    """A sweep config file over the fixture benchmarks, workdirs under ``root``."""
    data = tmp / "data"
    data.mkdir(parents=True, exist_ok=True)
    manifest = sweep_fixture.write_manifest(tmp / "manifest.json")
    path = tmp / f"sweep_{root.name}.py"
    path.write_text(SWEEP_FILE.format(root=str(root), benchmarks=tuple(benchmarks),
                                      methods=tuple(methods), seeds=tuple(seeds),
                                      run_config=f"{FIXTURE}:{{benchmark}}", data=str(data),
                                      manifest=str(manifest)))
    return path


def load_sweep(path: pathlib.Path):
    from countermem_jax.sweep.spec import load_config_file
    return load_config_file(str(path))


def results(root: pathlib.Path) -> dict:
    """Per workdir (relative to ``root``): the metrics that must not depend on where or how the
    runs ran (scores, per-task outcomes, tokens), the store's hash, every transition."""
    out = {}
    for metrics_file in sorted(root.glob("*/*/*/metrics.json")):
        wd = metrics_file.parent
        m = json.loads(metrics_file.read_text())
        ends = {}
        for log in sorted(wd.glob("eval/*/log.jsonl")):
            for line in log.read_text().splitlines():
                e = json.loads(line)
                if e.get("event") == "task_end":
                    ends[(e["run"], e["task_id"])] = (e["solved"], e["tokens"], e["llm_calls"])
        transitions = []
        if (wd / "log.jsonl").exists():
            for line in (wd / "log.jsonl").read_text().splitlines():
                e = json.loads(line)
                if e.get("event") == "transition":
                    transitions.append((e["seed"], e["episode"], e["task_id"], e["action"],
                                        round(e["reward"], 6)))
        store = wd / "store_frozen.jsonl"   # build hash: the content hash covers creation times
        out[str(wd.relative_to(root))] = {
            "score": m["aggregate"]["score"] if "aggregate" in m else None,
            "base": m["base"]["score"], "countermem": m["countermem"].get("score"),
            "paired": m["paired"], "seeds": m["seeds"], "ends": ends,
            "transitions": sorted(transitions),
            "store": load_frozen(store).build_hash() if store.exists() else None}
    return out
