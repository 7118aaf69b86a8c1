"""Upper bounds on the LLM calls of the protocol studies (accumulation §5.2, transfer §5.3,
rescued/broken App. E.3, token budget App. E.2, breakdown §5.4/App. D.7) from the study config
alone, cell by cell as each runner (``studies/<name>.py``) spends them; the per-task and
per-phase bounds are ``cost``'s.
"""
import collections
import itertools

from countermem_jax.studies import cells, cost
from countermem_jax.studies.transfer import CONDITIONS

PHASES = cost.PHASES + ("other",)   # other: transfer's look-alike generation


class Tally:
    """Calls per phase. Calls added under the same ``key`` are the same requests replayed by the
    study's cache (or a prefix of them): ``total`` counts the largest once; ``key=None`` is
    work no other cell repeats."""

    def __init__(self):
        self._shared: dict = {}
        self._full = collections.Counter()
        self._unique = itertools.count()

    def add(self, phase: str, calls: int, key=None) -> None:
        """Books ``calls`` of ``phase``; see the class docstring for ``key``."""
        self._full[phase] += calls
        slot = (phase, key if key is not None else ("unique", next(self._unique)))
        self._shared[slot] = max(self._shared.get(slot, 0), calls)

    def add_phases(self, phases: dict, **keys) -> None:
        """Books a cell's ``cost.phase_requests``, phase ``p`` under ``keys.get(p)``."""
        for phase, calls in phases.items():
            self.add(phase, calls, keys.get(phase))

    def result(self) -> dict:
        """Per phase, ``total`` (the cache's replays free) and ``without_cache``."""
        out = dict.fromkeys(PHASES, 0)
        for (phase, _), calls in self._shared.items():
            out[phase] += calls
        out["total"] = sum(out[p] for p in PHASES)
        out["without_cache"] = sum(self._full.values())
        return out


def accumulation(study) -> dict:
    """Per method, ordering and snapshot n: a build over the ordering's first n source tasks
    (the longest replays the shorter), a base and a memory run over the held-out tasks and, once
    n reaches ``regression_tasks``, both again over the ordering's first ``regression_tasks``
    tasks; CounterMem's selector is trained once for the whole study."""
    p, base = study.protocol, study.base
    t = Tally()
    for method in p.methods:
        cfg = cells.phase_config(base, method=method)
        per, runs = cost.task_requests(cfg), cost.memory_run_count(cfg)
        t.add("selector", cost.selector_requests(cfg), key="the study's one selector")
        for o, n in itertools.product(range(p.orderings), p.checkpoints):
            t.add("build", n * per["build"], key=(method, o))
            t.add("base_run", base.splits.n_eval * per["base"], key="held-out tasks")
            t.add("memory_runs", base.splits.n_eval * runs * per["memory"])
            if n >= p.regression_tasks:
                t.add("base_run", p.regression_tasks * per["base"], key=("earlier tasks", o))
                t.add("memory_runs", p.regression_tasks * runs * per["memory"])
    return t.result()


def transfer(study) -> dict:
    """Per method a build and selector (no evaluation of the cells); one look-alike generation
    per frozen CounterMem record (at most the store's capacity, and the distillations of the
    construction tasks); per condition ``n_pairs`` targets run without memory and with each
    method's memory restricted to the pair's source (one run)."""
    p, base = study.protocol, study.base
    t = Tally()
    for method in p.methods:
        cfg = cells.phase_config(base, method=method)
        phases = cost.phase_requests(cfg)
        t.add("build", phases["build"])
        t.add("selector", phases["selector"])
        for _ in CONDITIONS:
            t.add("memory_runs", p.n_pairs * cost.task_requests(cfg)["memory"])
    cm = cells.phase_config(base, method="countermem")
    t.add("other", min(cm.memory.capacity, cm.splits.n_build * cost.distillations(cm)))
    for _ in CONDITIONS:
        t.add("base_run", p.n_pairs * cost.task_requests(base)["base"])
    return t.result()


def rescued(study) -> dict:
    """Per benchmark and method, the three phases with ``n_paired`` held-out tasks and the
    benchmark's own split sizes otherwise; the methods' base runs of a benchmark coincide."""
    p = study.protocol
    t = Tally()
    for bench, method in itertools.product(p.benchmarks, p.methods):
        cfg = cells.setting_config(study.base, bench, study.get("settings"), method=method,
                                   **{"splits.n_eval": int(p.n_paired)})
        t.add_phases(cost.phase_requests(cfg), base_run=bench)
    return t.result()


def budget(study) -> dict:
    """Per benchmark and method, a probe build over the whole construction split, the
    affordable prefix's build (a replay of the probe's, at most as long), the selector and an
    evaluation of every held-out task (the token budget cuts the score, not the runs); the
    methods' base runs of a benchmark coincide."""
    p = study.protocol
    t = Tally()
    for bench, method in itertools.product(p.benchmarks, p.methods):
        cfg = cells.setting_config(study.base, bench, study.get("settings"), method=method)
        phases = cost.phase_requests(cfg)
        t.add("build", phases["build"], key=(bench, method))   # the probe
        t.add_phases(phases, build=(bench, method), base_run=bench)
    return t.result()


def breakdown(study) -> dict:
    """Per benchmark and agent, the three phases of CounterMem with that setting's sizes and
    every selector seed; nothing is shared (the agents' base runs differ)."""
    p = study.protocol
    t = Tally()
    for bench, agent in itertools.product(p.benchmarks, p.agents):
        t.add_phases(cost.phase_requests(cells.setting_config(
            study.base, bench, study.get("settings"),
            **{"agent.kind": agent, "method": "countermem"})))
    return t.result()


def replication(study) -> dict:
    """The replication over split seeds: each seed's variant study (its arms share one build,
    selector and base run; the ablations' seeds add theirs), summed over the seeds."""
    from countermem_jax.studies import replication as replication_study
    per = {f"split seed {r}": cost.study_requests(replication_study.seed_study(study, r))["total"]
           for r in range(study.protocol.split_seeds)}
    return {"settings": per, "total": sum(per.values())}


BOUNDS = {"accumulation": accumulation, "transfer": transfer, "rescued": rescued,
          "budget": budget, "breakdown": breakdown, "replication": replication}


def requests(study) -> dict:
    """The bound of any study config: a four-domain study's per setting and summed, a variant
    study's per phase, a protocol study's per phase with and without the cache's replays."""
    if "grid" in study:
        return cost.grid_requests(study)
    if "variants" in study:
        return cost.study_requests(study)
    return BOUNDS[study.study](study)
