"""The three phases at 1 and at 64 tasks in flight against a slow OpenAI-compatible server
(keep a vLLM server busy in every phase, without changing any result).

    python -m benchmarks.speed.pipeline [--latency_ms=100] [--concurrency=64] [--scale=1]

A scripted SQL model (``benchmarks/scripted_sql.py``: Spider tasks when the shared data is present,
else a generated SQLite table) is served over HTTP by the local loopback server in its own
process, answering each request after ``latency_ms``. build_memory, train_selector and evaluate
run once with every concurrency knob at 1 and once at ``--concurrency`` (``eval.concurrency``,
the client's limit, ``construction.wave_size`` and ``selector.wave_size``), each in its own
workdir with its own response cache. Per phase it prints the wall time at both, the speedup,
the server's peak number of requests in flight, whether the artefacts are identical
(``identical``: the store's records in order with their statistics, each seed's best step,
validation returns and parameters, the evaluation metrics of every run — evaluation at
``--concurrency`` runs on a copy of the store and selectors made at 1, while selector training at
W > 1 is expected to differ from W = 1, its episodes acting with the wave's starting parameters,
and is instead checked to reproduce itself (``reproducible_at_<W>``: trained twice);
``files_identical``: the store file's bytes and the checkpoint fingerprints training recorded,
which also differ by the records' creation times and Orbax's metadata timestamps), and the
framework's own overhead at ``--concurrency``: the share of the task runs' wall time during
which none of the run's own LLM calls or checks was under way, each timed as the task awaits it
(a chat call from the request to the task resuming, cache hits included; a check from the
request to the task resuming: its turn for a checker thread, the check, the return to the loop;
a task's condition-judge calls overlap: the union of their intervals counts, not their sum);
``overhead_checks_in_thread_pct`` counts a check only while it runs in its thread; and the
share of prompt characters that repeat an earlier prompt's prefix (``prefix_share_pct``: over
the prompts the phase sent to the server, response-cache hits excluded, each prompt's longest
common prefix with any earlier prompt of the phase, summed, over their summed lengths): what
vLLM's prefix cache can serve (goal on Spider: >= 70 % in evaluation). Goals:
evaluation ≥ 40×, construction ≥ 15×, selector training ≥ 20×, overhead ≤ 5%. Last line:
``result: {json}``. ``--scale`` multiplies the task counts and decisions (the default sizes
take about ten minutes on two cores, most of it the runs at 1).
"""
import contextlib
import contextvars
import dataclasses
import hashlib
import json
import pathlib
import shutil
import tempfile
import threading
import time
import urllib.request

import ml_collections
import numpy as np
from absl import app, flags, logging

from countermem_jax import experiment
from countermem_jax.method.agents import Agent
from countermem_jax.backbones.base import Backbone, Charge, SamplingParams
from countermem_jax.backbones.cache import CachedBackbone
from benchmarks.testing.openai_server import server_process
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from countermem_jax.runtime.inflight import CheckerPool
from countermem_jax.protocol import config_files
from countermem_jax.method.memory import load_frozen
from benchmarks import artefacts, scripted_sql
from benchmarks.common import print_result
from benchmarks.speed.prefix_share import PrefixShare, prompt_text

_LATENCY = flags.DEFINE_integer("latency_ms", 100, "Server latency per request.")
_CONCURRENCY = flags.DEFINE_integer("concurrency", 64, "Tasks / waves in flight to compare with 1.")
_SCALE = flags.DEFINE_integer("scale", 1, "Multiplies the task counts and selector decisions.")
_WORKDIR = flags.DEFINE_string("workdir", "", "Where the two workdirs go (default: a temp dir).")

GOALS = {"construction": 15.0, "selector_training": 20.0, "evaluation": 40.0}
MODEL = "scripted-sql"
SEEDS = (0, 1)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Task counts per split of the generated manifest, and the selector's training decisions
    per seed (the §4.2 build / train / validation / evaluation protocol, shrunk)."""
    build: int = 64
    train: int = 64         # as many as a seed's episodes: episodes are not cache replays
    validation: int = 16
    eval: int = 128
    decisions: int = 64     # selector decisions per seed

    def scaled(self, k: int) -> "Sizes":
        """Every count times ``k`` (``--scale``)."""
        return Sizes(*(k * v for v in dataclasses.astuple(self)))


WARM_UP = Sizes(build=4, train=2, validation=1, eval=4, decisions=8)


class _Waits:
    """Seconds spent waiting for HTTP replies and inside checks (sums over calls), task-run
    wall time, and the time task runs spent with at least one of their own calls or checks
    under way (``waiting_s``: what the overhead excludes; ``waiting_in_check_s`` with checks
    counted only while they run in their thread); thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.http_s = self.check_s = self.check_awaited_s = self.task_s = 0.0
        self.waiting_s = self.waiting_in_check_s = 0.0
        self.tasks = 0

    def add(self, field: str, seconds: float) -> None:
        """Adds ``seconds`` to the sum named ``field``; called from the checker threads too."""
        with self.lock:
            setattr(self, field, getattr(self, field) + seconds)


class _TaskWaiting:
    """One task run's waiting time: the union of the intervals during which at least one of
    its LLM calls or checks is under way. A task's calls can overlap (its condition judge's
    calls run together), so summing them would count the same wait twice. Two unions are kept:
    ``seconds`` times a check as the task awaits it, as a server call is (from the moment the
    task asks until it resumes: the queue for a checker thread, the check, the return to the
    loop), ``seconds_in_check`` only while the check itself runs in its thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.in_flight = {"awaited": 0, "in_check": 0}
        self.since = {"awaited": 0.0, "in_check": 0.0}
        self.total = {"awaited": 0.0, "in_check": 0.0}

    @property
    def seconds(self) -> float:
        return self.total["awaited"]

    @property
    def seconds_in_check(self) -> float:
        return self.total["in_check"]

    @contextlib.contextmanager
    def waiting(self, unions: tuple):
        """Marks a call or check of the task as under way in ``unions`` while the block runs."""
        with self.lock:
            for union in unions:
                if self.in_flight[union] == 0:
                    self.since[union] = time.perf_counter()
                self.in_flight[union] += 1
        try:
            yield
        finally:
            with self.lock:
                for union in unions:
                    self.in_flight[union] -= 1
                    if self.in_flight[union] == 0:
                        self.total[union] += time.perf_counter() - self.since[union]


# The running task run's waiting time (set by ``_timed_tasks``; its calls, checks and the
# asyncio tasks and checker threads they start see the same object).
_TASK_WAITING: contextvars.ContextVar = contextvars.ContextVar("task_waiting", default=None)


def _waiting(*unions):
    """The running task run's ``waiting`` block (in ``unions``, default both), or a no-op
    outside a task run."""
    tracker = _TASK_WAITING.get()
    if tracker is None:
        return contextlib.nullcontext()
    return tracker.waiting(unions or ("awaited", "in_check"))


class _PrefixCountingBackbone(OpenAICompatibleBackbone):
    """The HTTP client, booking every prompt it sends (the response cache sits in front)."""

    def __init__(self, *args, prefixes: PrefixShare, **kwargs):
        super().__init__(*args, **kwargs)
        self.prefixes = prefixes

    async def _chat(self, messages, params):
        self.prefixes.add(prompt_text(messages))
        return await super()._chat(messages, params)


class _TimedBackbone(Backbone):
    """Times every chat call (the wait for the server, or for an identical call in flight)."""

    def __init__(self, inner: Backbone, waits: _Waits):
        super().__init__(inner.ledger)
        self.inner, self.waits = inner, waits
        self.model_name, self.reasoning_effort = inner.model_name, inner.reasoning_effort

    async def chat(self, messages, params=SamplingParams(), charge=Charge()):
        start = time.perf_counter()
        try:
            with _waiting():
                return await self.inner.chat(messages, params, charge)
        finally:
            self.waits.add("http_s", time.perf_counter() - start)

    async def _chat(self, messages, params):  # pragma: no cover - chat() is overridden
        raise NotImplementedError

    async def aclose(self):
        await self.inner.aclose()


class _TimedEvaluator:
    """The checker, timed inside its own call; everything else is the checker's own."""

    def __init__(self, inner, waits: _Waits):
        self.inner, self.waits = inner, waits

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def evaluate(self, state, action):
        start = time.perf_counter()
        try:
            with _waiting("in_check"):
                return self.inner.evaluate(state, action)
        finally:
            self.waits.add("check_s", time.perf_counter() - start)


def _config(manifest: pathlib.Path, sizes: Sizes, concurrency: int):
    """The run's config at one concurrency level: every knob that lets tasks or waves run
    together set to ``concurrency``, everything else the same at both levels."""
    cfg = config_files.load("configs/default.py")
    cfg.data.benchmark = "spider"
    cfg.splits.update(manifest=str(manifest), group_by_reference=False)
    cfg.agent.update(kind="react", max_attempts=2)
    cfg.backbone.update(kind="openai", model=MODEL, max_concurrency=concurrency)
    cfg.selector.update(total_decisions=sizes.decisions, learning_starts=4, train_every=1,
                        target_sync_every=8, checkpoint_every=max(1, sizes.decisions // 2),
                        batch_size=8, seeds=SEEDS)
    cfg.eval.update(selector="dqn", concurrency=concurrency)
    cfg.construction.wave_size = concurrency
    cfg.selector.wave_size = concurrency
    return cfg


def _knobs(cfg) -> dict:
    """The concurrency knobs as set in ``cfg``, printed in the result."""
    return {"eval.concurrency": cfg.eval.concurrency,
            "construction.wave_size": cfg.construction.wave_size,
            "selector.wave_size": cfg.selector.wave_size}


def _server_stats(url: str, reset: bool = False) -> dict:
    """The loopback server's request count and peak in flight since the last reset."""
    root = url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{root}/stats{'?reset=1' if reset else ''}", timeout=10) as r:
        return json.loads(r.read())


@contextlib.contextmanager
def _timed_tasks(waits: _Waits):
    """Times every task run (``Agent.run``) while the phase runs: the time the decisions of a
    task take, waits included, which the overhead is a share of."""
    original, original_check = Agent.run, CheckerPool.run

    async def run(self, *args, **kwargs):
        tracker = _TaskWaiting()
        _TASK_WAITING.set(tracker)  # this task run's context and what it starts
        start = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            waits.add("task_s", time.perf_counter() - start)
            waits.add("waiting_s", tracker.seconds)
            waits.add("waiting_in_check_s", tracker.seconds_in_check)
            waits.add("tasks", 1)

    async def check(pool, fn, *args):
        """A check as the task awaits it: its turn for a checker thread, the check, the
        return to the event loop."""
        start = time.perf_counter()
        try:
            with _waiting("awaited"):
                return await original_check(pool, fn, *args)
        finally:
            waits.add("check_awaited_s", time.perf_counter() - start)
    Agent.run, CheckerPool.run = run, check
    try:
        yield
    finally:
        Agent.run, CheckerPool.run = original, original_check


def _run_phase(fn, cfg, wd: pathlib.Path, url: str, bench) -> dict:
    """Runs one phase (``fn``: an ``experiment`` entry point) into ``wd`` with timed backbone,
    checker and task runs; returns its wall time, the server's counters and the overhead share
    (task-run time spent neither in HTTP waits nor in checks)."""
    waits, prefixes = _Waits(), PrefixShare()
    inner = _PrefixCountingBackbone(url, MODEL, max_concurrency=cfg.backbone.max_concurrency,
                                    prefixes=prefixes)
    backbone = _TimedBackbone(CachedBackbone(inner, wd / "llm_cache"), waits)
    tasks, evaluator, domain = bench
    _server_stats(url, reset=True)
    start = time.perf_counter()
    with _timed_tasks(waits):
        fn(cfg, wd, backbone=backbone,
           benchmark=(tasks, _TimedEvaluator(evaluator, waits), domain))
    wall = time.perf_counter() - start
    stats = _server_stats(url)
    task_s, n_tasks = waits.task_s, waits.tasks
    def share(waiting_s):
        return round(100.0 * (task_s - waiting_s) / task_s, 2) if task_s else None
    return {"wall_s": round(wall, 3), "server_peak_in_flight": stats["peak_in_flight"],
            "server_requests": stats["requests"], "tasks": n_tasks,
            "task_wall_s": round(task_s, 3), "http_wait_s": round(waits.http_s, 3),
            "check_s": round(waits.check_s, 3),
            "check_awaited_s": round(waits.check_awaited_s, 3),
            "overhead_pct": share(waits.waiting_s),
            "overhead_checks_in_thread_pct": share(waits.waiting_in_check_s),
            "prefix_share_pct": prefixes.pct, "prompt_chars_sent": prefixes.total}


def _store_records(wd: pathlib.Path) -> tuple[list, str]:
    """The frozen store's records in order without their creation time and snapshot id, and the
    file's bytes (which carry those two)."""
    out = []
    for record in load_frozen(wd / "store_frozen.jsonl").records:
        obj = record.to_json()
        obj["provenance"] = {k: v for k, v in obj["provenance"].items()
                             if k not in ("created_at", "snapshot_id")}
        out.append(obj)
    return out, hashlib.sha256((wd / "store_frozen.jsonl").read_bytes()).hexdigest()


def _checkpoints(wd: pathlib.Path) -> tuple[dict, str]:
    """Per seed: the best step, the validation returns and a hash of the best parameters; and
    the checkpoint file fingerprints training recorded (Orbax's metadata holds a timestamp)."""
    return artefacts.selectors(wd), (wd / "selector" / "fingerprints.json").read_text()


def _metrics(wd: pathlib.Path) -> tuple[dict, None]:
    """The evaluation's metrics (no bytes to compare: its files name their workdir)."""
    return artefacts.evaluation_metrics(wd), None


# (result key, experiment entry point, reader of what the phase wrote into its workdir: returns
# the computed artefacts and the files' fingerprint, None where the files name their workdir).
PHASES = (("construction", experiment.build_memory, _store_records),
          ("selector_training", experiment.train_selector, _checkpoints),
          ("evaluation", experiment.evaluate, _metrics))


def _copy_built(source: pathlib.Path, target: pathlib.Path) -> None:
    """A fresh copy of a workdir's construction and training artefacts, without its evaluation
    results and its response cache (the copy recomputes every reply it needs)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(
        "llm_cache", "eval", "metrics*.json", ".locks"))


def _with_w1_selector(cfg):
    """``cfg`` for evaluating selectors trained at W = 1 (``selector.wave_size`` is part of
    the selector's fingerprint); evaluation's own knobs stay as they are."""
    cfg = ml_collections.ConfigDict(cfg.to_dict())
    cfg.selector.wave_size = 1
    return cfg


def _manifest(tasks, sizes: Sizes) -> dict:
    """A split manifest cutting ``tasks`` in order into disjoint build / train / validation /
    eval sets of the given sizes (no task in two splits, §4.2)."""
    cuts = np.cumsum([0, sizes.build, sizes.train, sizes.validation, sizes.eval])
    return {name: [t.task_id for t in tasks[a:b]]
            for name, a, b in zip(("build", "train", "validation", "eval"), cuts, cuts[1:])}


def _warm_up(root: pathlib.Path, url: str, bench, sizes: Sizes) -> None:
    """Every phase once on a few tasks, untimed: JAX compiles its functions here, not inside
    the first timed run (which would flatter the second). The selector schedule is the timed
    one (the replay buffer's shape follows the number of decisions)."""
    warm = dataclasses.replace(WARM_UP, decisions=sizes.decisions)
    (root / "warm_up.json").write_text(json.dumps(_manifest(bench[0], warm)))
    cfg = _config(root / "warm_up.json", warm, 1)
    for phase, fn, _ in PHASES:
        _run_phase(fn, cfg, root / "warm_up", url, bench)


def _benchmark(root: pathlib.Path, sizes: Sizes) -> tuple[str, tuple]:
    """The benchmark's name and ``(tasks, evaluator, domain)``: Spider when the shared data is
    present, else a generated SQLite table under ``root``."""
    n = sizes.build + sizes.train + sizes.validation + sizes.eval
    bench = scripted_sql.spider_tasks(n)
    source = "spider"
    if bench is None:
        bench, source = scripted_sql.people_tasks(n, root), "generated sqlite"
    return source, bench


def _clear_previous_runs(root: pathlib.Path, high: int) -> None:
    """Removes the workdirs an earlier benchmark left under ``root``: their stores, checkpoints
    and response caches would turn this run's phases into resumes and cache hits."""
    for name in ("warm_up", "c1", f"c{high}", f"c{high}_eval", f"c{high}_again"):
        if (root / name).exists():
            print(f"removing the earlier run's workdir {root / name}")
            shutil.rmtree(root / name)


def main(argv):
    """Warms up, runs the three phases at concurrency 1 and ``--concurrency`` against one
    server, and prints per phase the speedup, the peaks in flight, whether the artefacts are
    identical and the overhead share, then the ``result:`` line."""
    del argv
    logging.set_verbosity(logging.WARNING)  # Orbax logs every checkpoint step at INFO
    sizes = Sizes().scaled(_SCALE.value)
    high = _CONCURRENCY.value
    root = pathlib.Path(_WORKDIR.value or tempfile.mkdtemp(prefix="countermem_pipeline_"))
    root.mkdir(parents=True, exist_ok=True)
    _clear_previous_runs(root, high)
    source, bench = _benchmark(root, sizes)
    tasks = bench[0]
    (root / "manifest.json").write_text(json.dumps(_manifest(tasks, sizes)))
    (root / "responder.json").write_text(json.dumps(scripted_sql.responder_config(tasks)))
    print(f"{source}: {len(tasks)} tasks ({dataclasses.asdict(sizes)}), server latency "
          f"{_LATENCY.value} ms, concurrency 1 vs {high}; workdirs under {root}")
    result = {"benchmark": source, "sizes": dataclasses.asdict(sizes),
              "latency_ms": _LATENCY.value, "concurrency": high}
    with server_process(_LATENCY.value / 1000.0, "benchmarks.scripted_sql:make_responder",
                        str(root / "responder.json")) as url:
        _warm_up(root, url, bench, sizes)
        runs, artefacts, repeated = {}, {}, {}
        # Same manifest, server and responder at both levels; separate workdirs and caches, so
        # that the second level recomputes everything instead of reading the first's replies.
        for level in (1, high):
            cfg = _config(root / "manifest.json", sizes, level)
            result.setdefault("knobs", {})[str(level)] = _knobs(cfg)
            wd = root / f"c{level}"
            for phase, fn, read in PHASES:
                target, phase_cfg = wd, cfg
                if level != 1 and phase == "selector_training":
                    _copy_built(wd, root / f"c{level}_again")  # to train once more at this W
                if level != 1 and phase == "evaluation":
                    # evaluation of the store and selectors made at 1, so that its metrics at
                    # both levels are computed from the same frozen artefacts
                    target, phase_cfg = root / f"c{level}_eval", _with_w1_selector(cfg)
                    _copy_built(root / "c1", target)
                runs[(phase, level)] = _run_phase(fn, phase_cfg, target, url, bench)
                artefacts[(phase, level)] = read(target)
                print(f"  {phase} at {level}: {runs[(phase, level)]}", flush=True)
            if level != 1:  # a wave's episodes act with its start's parameters: W changes the
                # selector (docs/concurrency.md), but a W must reproduce itself
                _run_phase(experiment.train_selector, cfg, root / f"c{level}_again", url, bench)
                repeated[level] = (_checkpoints(root / f"c{level}_again")[0]
                                   == artefacts[("selector_training", level)][0])
    # ``artefacts[...][0]`` compares what the phase computed; ``[1]`` the files' bytes.
    for phase, _, _ in PHASES:
        one, many = runs[(phase, 1)], runs[(phase, high)]
        speedup = one["wall_s"] / many["wall_s"]
        row = {"wall_1_s": one["wall_s"], f"wall_{high}_s": many["wall_s"],
               "speedup": round(speedup, 2), "goal": GOALS[phase],
               "peak_in_flight_1": one["server_peak_in_flight"],
               f"peak_in_flight_{high}": many["server_peak_in_flight"],
               "identical": artefacts[(phase, 1)][0] == artefacts[(phase, high)][0],
               "files_identical": None if artefacts[(phase, 1)][1] is None
               else artefacts[(phase, 1)][1] == artefacts[(phase, high)][1],
               f"overhead_pct_at_{high}": many["overhead_pct"],
               f"overhead_checks_in_thread_pct_at_{high}": many["overhead_checks_in_thread_pct"],
               "prefix_share_pct_1": one["prefix_share_pct"],
               f"prefix_share_pct_{high}": many["prefix_share_pct"]}
        if phase == "selector_training":
            row[f"reproducible_at_{high}"] = repeated[high]
        result[phase] = row
        print(f"{phase:>18}: {one['wall_s']:8.2f} s at 1, {many['wall_s']:7.2f} s at {high} "
              f"-> {speedup:6.1f}x (goal {GOALS[phase]:g}x); server peak in flight "
              f"{one['server_peak_in_flight']} / {many['server_peak_in_flight']}; identical "
              f"{row['identical']}; framework overhead {many['overhead_pct']}% of task time "
              f"({many['overhead_checks_in_thread_pct']}% with checks counted in their thread); "
              f"prompt characters repeating an earlier prompt's prefix {one['prefix_share_pct']}%"
              f" / {many['prefix_share_pct']}%")
    print_result(result)


if __name__ == "__main__":
    app.run(main)
