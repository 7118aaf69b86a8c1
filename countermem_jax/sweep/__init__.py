"""Sweeps: the paper's grid as one command, spread over hosts with Ray, resumable.

    python -m countermem_jax.sweep --sweep=configs/sweeps/<name>.py [--dry_run | --local]
"""
import importlib
import json
import pathlib

from countermem_jax.phases import config_fingerprint, config_validation
from countermem_jax.sweep import execute, graph, schedule, wall_time
from countermem_jax.sweep.spec import SweepError

__all__ = ["run_sweep", "SweepError"]


def _precheck(run) -> str | None:
    """Why ``run`` must not start (its config is invalid, or its workdir was made with another
    config), before anything of the sweep runs; None when it may."""
    try:
        config_validation.validate(run.config)
        config_fingerprint.check(run.config, pathlib.Path(run.workdir), run.phase)
    except (config_validation.ConfigError, config_fingerprint.WorkdirMismatch) as err:
        return schedule.one_line(err)
    return None


def _executor(sweep, local: bool, address: str, ray_init: dict | None, runs):
    urls_env = sweep.get("urls_env") or execute.DEFAULT_URLS_ENV
    imports = tuple(sweep.get("imports") or ())
    if local:
        return schedule.LocalExecutor(urls_env, imports)
    from countermem_jax.sweep import ray_backend
    ray = ray_backend.import_ray()
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, **(ray_init or {}))
    ray_backend.check_feasible(ray, runs)
    return ray_backend.RayExecutor(ray, urls_env, imports, int(sweep.get("max_retries", 2)))


def evaluated_workdirs(runs, outcome) -> list[str]:
    """Workdirs whose every evaluation run finished: what the report reads."""
    ok = {}
    for run in runs:
        if run.phase == "evaluate":
            ok[run.workdir] = ok.get(run.workdir, True) and \
                outcome.states[run.name] in ("done", "skipped")
    return sorted(w for w, good in ok.items() if good)


def _to_redo(err, runs) -> str:
    """Which runs to redo for the workdir a report refusal names (none: the inputs disagree)."""
    workdir = getattr(err, "workdir", None)
    mine = [r for r in runs if r.workdir == workdir]
    if not mine:
        return ""
    broken = [r.name for r in mine if execute.not_whole(r)]
    if broken:
        return f"; run the sweep again to redo {', '.join(broken)}"
    evaluations = [r for r in mine if r.phase == "evaluate"]
    return (f"; redo {', '.join(r.name for r in evaluations)}: delete "
            f"{' '.join(str(r.marker) for r in evaluations)} and run the sweep again")


def write_report(sweep, workdirs, echo=print, runs=()) -> pathlib.Path | None:
    """``python -m countermem_jax.report WORKDIR... --out ROOT/report`` over the finished
    workdirs; a report that cannot be made is said in one line naming the runs to redo (the
    runs stay as they are)."""
    out = pathlib.Path(sweep.get("report_dir") or pathlib.Path(sweep.root) / "report")
    try:
        from countermem_jax.reporting import ReportError, build
    except ImportError as err:
        echo(f"report: not written ({err}; needs the `plots` extra)")
        return None
    try:
        written = build.write_report([str(w) for w in workdirs], str(out))
    except ReportError as err:
        echo(f"report: not written: {' '.join(str(err).split())}{_to_redo(err, runs)}")
        return None
    echo(f"report: {written['report.md']}")
    return pathlib.Path(written["report.md"])


def run_sweep(sweep, *, dry_run: bool = False, local: bool = False, address: str = "auto",
              ray_init: dict | None = None, report: bool = True, echo=print,
              tokens_per_s: float = 0.0, tokens_per_call: int = 0):
    """Plans the sweep and runs it (or only prints the plan, with the calls, tokens and, at
    ``tokens_per_s``, the hours it needs: ``wall_time``); returns the ``schedule.Outcome``
    (None for a dry run). ``ROOT/sweep_status.json`` records every run's state and reason."""
    for module in sweep.get("imports") or ():  # extra benchmarks, known before validation
        importlib.import_module(module)
    runs = graph.build_graph(sweep)
    if dry_run:
        echo(graph.describe(runs, sweep.root))
        echo(wall_time.describe(runs, tokens_per_s, tokens_per_call))
        return None
    executor = _executor(sweep, local, address, ray_init, runs)
    echo(f"sweep: {len(runs)} phase runs under {sweep.root} "
         f"({'in this process' if local else 'on Ray'})")
    outcome = schedule.run_graph(runs, executor,
                                 progress_every_s=float(sweep.get("progress_every_s", 30.0)),
                                 echo=echo, precheck=_precheck,
                                 hosted_cap=int(sweep.get("hosted_slots", 0) or 0))
    status = {r.name: {"phase": r.phase, "workdir": r.workdir, "state": outcome.states[r.name],
                       "error": outcome.errors.get(r.name), "ran": outcome.infos.get(r.name)}
              for r in runs}
    root = pathlib.Path(sweep.root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "sweep_status.json").write_text(json.dumps(status, indent=1, default=str))
    if outcome.errors:
        echo(f"{len(outcome.errors)} runs did not finish:\n{schedule.failure_report(outcome)}")
    workdirs = evaluated_workdirs(runs, outcome)
    if report and sweep.get("report", True) and workdirs:
        write_report(sweep, workdirs, echo, runs)
    return outcome
