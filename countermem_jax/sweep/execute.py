"""Runs one phase run in the current process: on a Ray worker (``ray_backend``) or in the
sweep's own process (``--local``).
"""
import copy
import datetime
import importlib
import json
import os
import pathlib
import socket
import time

from countermem_jax.backbones import served_urls

DEFAULT_URLS_ENV = "COUNTERMEM_LLM_URLS"


def result_path(run) -> pathlib.Path:
    """The file a finished run leaves besides its marker (checked before a run is skipped)."""
    wd = pathlib.Path(run.workdir)
    if run.phase == "build_memory":
        method = run.config.method
        if method == "countermem":
            return wd / "store_frozen.sha256"
        from countermem_jax import baselines
        return baselines.memory_paths(wd, method).frozen
    if run.phase == "train_selector":
        return wd / "selector" / f"seed_{run.config.selector.seeds[0]}" / "best.json"
    if run.config.method == "countermem" and run.config.eval.selector != "dqn":
        return wd / f"metrics_{run.config.eval.selector}.json"
    if run.config.method == "countermem" and len(run.config.eval.seeds) == 1:
        return wd / "eval" / f"countermem-dqn-seed{run.config.eval.seeds[0]}" / "metrics.json"
    return wd / "metrics.json"


def is_finished(run) -> bool:
    """A previous sweep finished ``run``: its marker exists and its outputs are whole
    (``not_whole``); a marker alone, with an output deleted, cut or edited since, does not
    count: the run is started again (the phases resume, or refuse in one line)."""
    return run.marker.is_file() and not_whole(run) is None


def not_whole(run) -> str | None:
    """Why ``run``'s outputs are not those of a finished run (None when they are): a build's
    frozen memory missing, or not matching the hash recorded when it was frozen (the hash file
    deleted: the build restores it from the run log); a seed's ``best.json`` or recorded best
    checkpoint missing or changed; an evaluation's metrics file unreadable, or a run it names
    without a result for some held-out task in its log (a log cut after the marker)."""
    path = result_path(run)
    if not path.exists():
        return f"{path} is missing"
    if run.phase == "build_memory":
        return _memory_not_whole(run, path)
    if run.phase == "train_selector":
        return _selector_not_whole(run, path)
    return _evaluation_not_whole(run, path)


def _memory_not_whole(run, path: pathlib.Path) -> str | None:
    from countermem_jax.method.memory.persistence import StoreFormatError, load_frozen
    try:
        if run.config.method == "countermem":
            load_frozen(path.with_suffix(".jsonl"), expected_hash=path.read_text().strip())
        else:
            from countermem_jax.baselines.memory import load_frozen_memory
            load_frozen_memory(path, run.config.method)
    except (StoreFormatError, OSError, ValueError) as err:
        return " ".join(str(err).split())
    return None


def _selector_not_whole(run, best: pathlib.Path) -> str | None:
    from countermem_jax.runtime.file_hash import fingerprint
    seed = str(run.config.selector.seeds[0])
    prints = best.parent.parent / "fingerprints.json"
    try:
        json.loads(best.read_text())
        recorded = json.loads(prints.read_text())[seed]
        step_dir = best.parent / str(recorded["step"])
        if fingerprint(step_dir) != recorded["fingerprint"]:
            return f"{step_dir}: not the checkpoint training recorded as seed {seed}'s best"
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"{prints}: no readable best checkpoint of seed {seed} ({err!r})"
    return None


def _evaluation_not_whole(run, path: pathlib.Path) -> str | None:
    from countermem_jax.reporting import load
    try:
        metrics = json.loads(path.read_text())
        runs = list(metrics["runs"]) if "runs" in metrics else ["base", metrics["run"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"{path}: unreadable metrics ({err!r})"
    return load.unreported_runs(run.workdir, runs)


def uses_node_servers(cfg) -> bool:
    """Whether a run of ``cfg`` talks to the host's own servers: a served backbone whose config
    names a URL file, not URLs of its own (a hosted API)."""
    return cfg.backbone.kind == "openai" and not served_urls.names_urls(cfg.backbone.base_urls)


def uses_hosted_api(cfg) -> bool:
    """Whether a run of ``cfg`` talks to a hosted API: a served backbone with URLs of its own
    (the sweep's ``hosted_slots`` cap them all together)."""
    return cfg.backbone.kind == "openai" and served_urls.names_urls(cfg.backbone.base_urls)


def phase_config(run, urls_env: str = DEFAULT_URLS_ENV):
    """The run's config with the host's LLM server URLs, when the host names them and the run
    uses the host's servers (``uses_node_servers``)."""
    cfg = copy.deepcopy(run.config)
    urls = os.environ.get(urls_env, "").strip()
    if urls and uses_node_servers(cfg):
        cfg.backbone.base_urls = urls
    return cfg


def execute(run, urls_env: str = DEFAULT_URLS_ENV, imports: tuple = ()) -> dict:
    """Imports ``imports`` (modules that register extra benchmarks), runs the phase, writes the
    marker; returns where and how long it ran."""
    for module in imports:
        importlib.import_module(module)
    from countermem_jax import experiment
    from countermem_jax.runtime import file_limits
    cfg = phase_config(run, urls_env)
    file_limits.check(cfg)   # a Ray worker is no binary: its soft open-file limit is raised here
    started = time.time()
    summary = getattr(experiment, run.phase)(cfg, run.workdir)
    done = {"run": run.name, "host": socket.gethostname(), "pid": os.getpid(),
            "seconds": round(time.time() - started, 3),
            "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "base_urls": cfg.backbone.base_urls, "llm_slots": run.llm_slots,
            "summary": _small(summary)}
    run.marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = run.marker.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(done, indent=1, default=str))
    os.replace(tmp, run.marker)
    return done


def _small(summary) -> dict:
    """The scalar part of a phase's summary (metrics stay in the workdir)."""
    if not isinstance(summary, dict):
        return {}
    return {k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool))}
