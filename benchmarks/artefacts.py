"""What a refactor must not change: the quickstart config and a small paper config run end to end
through the binaries against the scripted SQL model (``scripted_sql``, served over loopback
HTTP), and one JSON digest of what they stored: the frozen store's records (without their
creation times and snapshot ids), each selector seed's best step, validation returns and
parameters, and the evaluation's metrics.

    python -m benchmarks.artefacts --out=DIR > digest.json      # from the repository root

Run it on two checkouts (``git worktree add``) and ``diff`` the digests. It also runs on
checkouts from before ``benchmarks/`` existed (copy this file there; it falls back to the old
module paths). Needs the Spider data; a few minutes on two cores.
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys

from absl import app, flags

try:
    from benchmarks import scripted_sql
    RESPONDER = "benchmarks.scripted_sql:make_responder"
except ImportError:            # a checkout from before benchmarks/
    from countermem_jax.tools import scripted_sql
    RESPONDER = "countermem_jax.tools.scripted_sql:make_responder"
try:
    from benchmarks.testing.openai_server import server_process
except ImportError:
    from countermem_jax.testing.openai_server import server_process

SETTINGS = {
    "quickstart": ["--config=configs/spider_react_cpu.py"],
    "paper_small": ["--config=configs/paper.py:spider,react,gptoss", "--config.splits.n_build=12",
                    "--config.splits.n_train=10", "--config.splits.n_validation=4",
                    "--config.splits.n_eval=10", "--config.selector.total_decisions=16",
                    "--config.selector.checkpoint_every=8", "--config.selector.learning_starts=4",
                    "--config.selector.seeds=(0,)", "--config.eval.seeds=(0,)"],
}
PHASES = ("build_memory", "train_selector", "evaluate")
VARYING = ("created_at", "snapshot_id", "content_hash")   # a run's time and its store's id


def store_digest(path: pathlib.Path) -> tuple[str, int]:
    """sha256 of the store file's lines without the fields that name the run's time, and the
    number of lines."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = {k: v for k, v in json.loads(line).items() if k not in VARYING}
        if isinstance(obj.get("provenance"), dict):
            obj["provenance"] = {k: v for k, v in obj["provenance"].items() if k not in VARYING}
        lines.append(obj)
    return hashlib.sha256(json.dumps(lines, sort_keys=True).encode()).hexdigest(), len(lines)


def selectors(wd: pathlib.Path) -> dict:
    """Per selector seed: the best step, the validation returns and a sha256 of the best
    parameters."""
    import jax
    import numpy as np
    from countermem_jax.method.selector import checkpoint
    out = {}
    for directory in sorted((wd / "selector").glob("seed_*")):
        best = json.loads((directory / "best.json").read_text())
        params, _ = checkpoint.restore(directory, "best")
        digest = hashlib.sha256()
        for leaf in jax.tree_util.tree_leaves(params):
            digest.update(np.asarray(leaf).tobytes())
        out[directory.name] = {"best_step": best["best_step"], "val_returns": best["val_returns"],
                               "params": digest.hexdigest()}
    return out


def evaluation_metrics(wd: pathlib.Path) -> dict:
    """The evaluation's metrics, every run's included (their files name the workdir, so their
    bytes differ between workdirs)."""
    metrics = json.loads((wd / "metrics.json").read_text())
    runs = {p.parent.name: json.loads(p.read_text())["metrics"]
            for p in sorted(wd.glob("eval/*/metrics.json"))}
    return {k: metrics[k] for k in ("base", "aggregate", "evaluation_cost", "cost_of_building")
            if k in metrics} | {"runs": runs}


def digest(wd: pathlib.Path) -> dict:
    store, lines = store_digest(wd / "store_frozen.jsonl")
    metrics = evaluation_metrics(wd)
    return {"store": store, "store_lines": lines, "selectors": selectors(wd),
            "metrics": hashlib.sha256(json.dumps(metrics, sort_keys=True).encode()).hexdigest(),
            "score": metrics.get("aggregate", {}).get("score")}


def _all_spider_tasks():
    """Every Spider dev task the loader gives (``spider_tasks`` returns None when asked for
    more than there are)."""
    lo, hi = 1, 5000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if scripted_sql.spider_tasks(mid) else (lo, mid - 1)
    return scripted_sql.spider_tasks(lo)[0]


def _run(out: pathlib.Path) -> None:
    (out / "responder.json").write_text(json.dumps(
        scripted_sql.responder_config(_all_spider_tasks())))
    env = os.environ | {"JAX_PLATFORMS": "cpu", "PYTHONPATH": os.getcwd()}
    with server_process(0.0, RESPONDER, str(out / "responder.json")) as url:
        for name, args in SETTINGS.items():
            common = [*args, f"--workdir={out / name}", "--config.backbone.kind=openai",
                      f"--config.backbone.base_urls={url}", "--config.backbone.model=scripted"]
            for phase in PHASES:
                done = subprocess.run([sys.executable, "-m", f"countermem_jax.{phase}", *common],
                                      env=env, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{name}: {phase} failed:\n{done.stderr[-3000:]}")


def main(argv):
    del argv
    out = pathlib.Path(flags.FLAGS.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not flags.FLAGS.digest_only:
        _run(out)
    print(json.dumps({name: digest(out / name) for name in SETTINGS}, indent=1, sort_keys=True))


if __name__ == "__main__":
    # defined here, not on import: the tests import store_digest beside other binaries' flags
    flags.DEFINE_string("out", None, "Where the runs' workdirs go.")
    flags.DEFINE_bool("digest_only", False, "Digest the workdirs already in --out.")
    flags.mark_flag_as_required("out")
    app.run(main)
