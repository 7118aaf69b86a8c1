"""The sweep as a dependency graph of phase runs (the phases of Algorithm 1)."""
import dataclasses
import hashlib
import json
import pathlib
import re

from countermem_jax import baselines
from countermem_jax.phases import config_fingerprint
from countermem_jax.sweep import execute, spec as spec_lib


@dataclasses.dataclass
class PhaseRun:
    """One node: a phase on a workdir with its config, dependencies and resources."""
    name: str
    phase: str
    workdir: str
    config: object                 # the locked ConfigDict the phase runs with
    deps: list[str]
    cpus: float
    llm_slots: int
    label: str = ""                # e.g. "seed 0", "all seeds"
    hosted_slots: int = 0          # of the sweep's cluster-wide cap on hosted-API requests

    @property
    def marker(self) -> pathlib.Path:
        """Written when the phase run returns: a finished run is not started again."""
        tag = re.sub(r"[^\w.-]+", "_", self.name.rsplit(":", 1)[1]).strip("_")
        return pathlib.Path(self.workdir) / ".sweep" / f"{tag}.done.json"


def store_key(cfg) -> str:
    """What defines a workdir's results: build fields, plus the selector's if it trains one."""
    fields = config_fingerprint.fingerprint_fields(cfg, "build_memory")
    if baselines.needs_selector(cfg.method):
        fields.update(config_fingerprint.fingerprint_fields(cfg, "train_selector"))
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _workdir_name(cell: spec_lib.Cell, key: str) -> str:
    variant = "" if cell.variant == "main" else f"_{cell.variant}"
    return f"{cell.benchmark}/{cell.agent}_{cell.backbone}/{cell.method}{variant}-{key[:8]}"


class _Builder:
    def __init__(self, sweep):
        self.sweep = sweep
        self.runs: dict[str, PhaseRun] = {}
        self.lanes: dict[str, str] = {}   # workdir -> its last run's name
        cpus = sweep.get("cpus") or {}
        self.cpus = {p: float(cpus.get(p, 1.0)) for p in spec_lib.PHASES}

    def add(self, workdir: str, phase: str, cfg, slots: int, deps: list[str],
            label: str = "") -> str:
        name = f"{workdir}:{phase}" + (f"[{label}]" if label else "")
        if name in self.runs:
            return name
        lane = self.lanes.get(workdir)
        deps = list(deps) + ([lane] if lane and lane not in deps else [])
        reserved = slots if execute.uses_node_servers(cfg) else 0
        hosted = (spec_lib.hosted_slots(self.sweep, cfg, slots)
                  if execute.uses_hosted_api(cfg) else 0)
        self.runs[name] = PhaseRun(name, phase, workdir, cfg, deps, self.cpus[phase], reserved,
                                   label, hosted)
        self.lanes[workdir] = name
        return name


def build_graph(sweep) -> list[PhaseRun]:
    """Every phase run of the sweep, dependencies before dependents."""
    root = pathlib.Path(sweep.root)
    b = _Builder(sweep)
    for cell in spec_lib.cells(sweep):
        slots = {p: spec_lib.slots_for(sweep, cell.config, p) for p in spec_lib.PHASES}
        cfg = spec_lib.with_slots(cell.config, slots["build_memory"], slots["train_selector"],
                                  slots["evaluate"])
        if execute.uses_hosted_api(cfg):   # its client never exceeds its share of the cap
            slots = {p: spec_lib.hosted_slots(sweep, cfg, s) or s for p, s in slots.items()}
        workdir = str(root / _workdir_name(cell, store_key(cfg)))
        method, seeds = cell.method, cell.seeds
        deps = []
        if baselines.needs_construction(method):
            deps = [b.add(workdir, "build_memory", spec_lib.for_phase(
                cfg, slots["build_memory"]), slots["build_memory"], [])]
        if not baselines.needs_selector(method) or cfg.eval.selector != "dqn":
            b.add(workdir, "evaluate", spec_lib.for_phase(cfg, slots["evaluate"]),
                  slots["evaluate"], deps, "" if method != "countermem" else cfg.eval.selector)
            continue
        previous = deps
        for i, seed in enumerate(seeds):
            trained = b.add(workdir, "train_selector", spec_lib.for_phase(
                cfg, slots["train_selector"], selector__seeds=(seed,)),
                slots["train_selector"], previous, f"seed {seed}")
            last = i == len(seeds) - 1   # also aggregates the finished runs of the other seeds
            previous = [b.add(workdir, "evaluate", spec_lib.for_phase(
                cfg, slots["evaluate"], eval__seeds=() if last else (seed,)),
                slots["evaluate"], [trained], f"seed {seed}" + (", all seeds" if last else ""))]
    return list(b.runs.values())


def steps(runs: list[PhaseRun]) -> list[list[PhaseRun]]:
    """The runs by step: step 1 needs nothing, step k+1 only runs of steps <= k. The runs of one
    step may run side by side (as many at once as the nodes' CPUs and llm_slots hold)."""
    depth = {}
    for r in runs:   # dependencies come first
        depth[r.name] = 1 + max((depth[d] for d in r.deps), default=0)
    out = [[] for _ in range(max(depth.values(), default=0))]
    for r in runs:
        out[depth[r.name] - 1].append(r)
    return out


def describe(runs: list[PhaseRun], root) -> str:
    """The ``--dry_run`` listing: one line per run with its resources and dependencies (a run on
    a hosted API says so), the steps whose runs may run side by side, the runs per phase."""
    index = {r.name: i for i, r in enumerate(runs)}
    root = str(root).rstrip("/") + "/"
    workdirs = sorted({r.workdir for r in runs})
    lines = [f"sweep: {len(runs)} phase runs in {len(workdirs)} workdirs under {root}"]
    for i, r in enumerate(runs):
        deps = ", ".join(f"#{index[d]}" for d in r.deps) or "-"
        where = "" if r.llm_slots or r.config.backbone.kind != "openai" else (
            f" own-endpoint hosted_slots={r.hosted_slots}")
        lines.append(f"#{i:<3} {r.name.removeprefix(root):<70} cpus={r.cpus:g} "
                     f"llm_slots={r.llm_slots:<3}{where} after: {deps}")
    for k, step in enumerate(steps(runs), 1):
        ids = " ".join(f"#{index[r.name]}" for r in step[:12]) + (" ..." if len(step) > 12 else "")
        hosted = sum(not r.llm_slots and r.config.backbone.kind == "openai" for r in step)
        lines.append(f"side by side, step {k}: {len(step)} runs ({ids}), llm_slots "
                     f"{sum(r.llm_slots for r in step)} on the hosts' servers, {hosted} on "
                     "their own endpoints")
    by_phase = {p: sum(r.phase == p for r in runs) for p in spec_lib.PHASES}
    lines.append("runs per phase: " + ", ".join(f"{p} {n}" for p, n in by_phase.items()))
    return "\n".join(lines)
