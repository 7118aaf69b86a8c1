"""Construction in flight: W tasks at once on private views, committed in split order when
their reads replay on the committed store, else run again; the store, log and costs are the
sequential run's (paper §3.2–3.3, Algorithm 1 phase 1; docs/concurrency.md).
"""
import asyncio
import collections
import dataclasses
import functools
from typing import Awaitable, Callable, Iterable, Sequence

import numpy as np

from countermem_jax.backbones.base import TokenLedger
from countermem_jax.method.memory.store import MemoryStore
from countermem_jax.method.memory_use import judged_conditions
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.method.retrieval import conditions as cond_lib
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.runtime.runlog import EventBuffer, RunLog

# (records, checker) -> their retrieval index (``context.retrieval_index``)
IndexBuilder = Callable[[Sequence, cond_lib.CompositeChecker], RetrievalIndex]

# Runs next in line checked after each commit: changes how much is redone, never the result.
WINDOW = 8


class _RecordingIndex(RetrievalIndex):
    """``inner``'s index (arrays shared) with the run's own checker; each retrieval is a read."""

    def __init__(self, inner: RetrievalIndex, checker: cond_lib.CompositeChecker, reads: list):
        self.__dict__.update(inner.__dict__)
        self.checker = checker
        self._reads = reads

    def retrieve_embedded(self, tasks, query_embeddings):
        """``RetrievalIndex.retrieve_embedded``, its query and answer recorded as a read."""
        results = super().retrieve_embedded(tasks, query_embeddings)
        seen = tuple((r.candidates, r.excluded_same_task, r.excluded_condition) for r in results)
        self._reads.append(("retrieve", (tuple(tasks), np.array(query_embeddings, copy=True)),
                            seen))
        return results


class TaskView:
    """One run's private copy of the committed store (its index source, and the store its
    ``CounterfactualBuilder`` admits into) and what the run read: ``reads``, (kind, argument,
    answer) in order."""

    def __init__(self, committed: MemoryStore, task_id: str, make_index: IndexBuilder,
                 checker: cond_lib.CompositeChecker):
        self.store = committed.copy()
        self.snapshot_id = committed.snapshot_id  # in the provenance of the records admitted
        self.task_id, self.make_index, self.checker = task_id, make_index, checker
        self.reads: list[tuple] = []
        self._index = None  # built on first use after each change of the view

    def _current_index(self) -> _RecordingIndex:
        if self._index is None:
            self._index = _RecordingIndex(self.make_index(self.store.records, self.checker),
                                          self.checker, self.reads)
        return self._index

    def index(self) -> RetrievalIndex:
        """The retrieval index over this view, as a decision sees it."""
        index = self._current_index()
        self.reads.append(("index", None, (bool(index.records),
                                           judged_conditions(index, self.task_id))))
        return index

    def _admit(self, kind: str, record):
        decision, evicted = getattr(self.store, kind)(record)
        self._index = None
        self.reads.append((kind, record, (decision, tuple(evicted))))
        return decision, evicted

    def propose(self, record):
        """Module II on this view (``MemoryStore.propose``)."""
        return self._admit("propose", record)

    def insert_unverified(self, record):
        """"CF without WM" storage (``MemoryStore.insert_unverified``, §6.1) on this view."""
        return self._admit("insert_unverified", record)

    def observe_reuse(self, record_id: str, label: int):
        """A reuse observation on this view; whether the record was there is a read."""
        found = record_id in self.store
        self.reads.append(("reuse", (record_id, label), found))
        if found:  # the record's statistic u changes its retrieval score (Eq. 8)
            self._index = None
        return self.store.observe_reuse(record_id, label)  # KeyError, as the store, if gone


def replay(committed: MemoryStore, view: TaskView) -> MemoryStore | None:
    """The committed store after ``view``'s run if each of its reads gives the same answer on
    ``committed`` (the run is then its task's sequential run); else None."""
    twin = TaskView(committed, view.task_id, view.make_index, view.checker)
    for kind, argument, answer in view.reads:
        if kind == "index":
            twin.index()
        elif kind == "retrieve":
            twin._current_index().retrieve_embedded(*argument)
        elif kind in ("propose", "insert_unverified"):
            twin._admit(kind, argument)
        else:
            try:
                twin.observe_reuse(*argument)
            except KeyError:
                pass  # recorded as not found; compared below
        if twin.reads[-1][2] != answer:
            return None
    return twin.store


class _Charges(TokenLedger):
    """A run's ledger, its calls kept in order to be booked in the phase's ledger on commit."""

    def __init__(self):
        super().__init__()
        self.booked: list[tuple] = []

    def record(self, *args, **kwargs) -> None:
        super().record(*args, **kwargs)
        self.booked.append((args, kwargs))


class RunOutput:
    """What one run writes, kept until it commits: log ``events``, parse ``failures``, charges
    (``ledger``)."""

    def __init__(self):
        self.events, self.failures, self.ledger = EventBuffer(), ParseFailureLog(), _Charges()

    def commit(self, log: RunLog, failures: ParseFailureLog, ledger: TokenLedger) -> None:
        """Appends the events to ``log`` (one durable write), the failures and charges in order."""
        log.write_all(self.events)
        for item in self.failures.items:
            failures.add(**item)
        for template, outcomes in self.failures.counts.items():
            for outcome, n in outcomes.items():
                if outcome != "parse_failures":   # ``add`` above counted each failure once
                    failures.count(template, outcome, n)
        for args, kwargs in self.ledger.booked:
            ledger.record(*args, **kwargs)


@dataclasses.dataclass
class _Run:
    task: object
    view: TaskView
    out: RunOutput
    future: asyncio.Task
    replayed: tuple = (None, -1, None)  # (store, reads replayed, store after) of the last replay

    def replay_on(self, store: MemoryStore) -> MemoryStore | None:
        """``replay(store, view)``, remembered until the run reads more or the store changes."""
        reads = len(self.view.reads)
        if self.replayed[0] is not store or self.replayed[1] != reads:
            self.replayed = (store, reads, replay(store, self.view) if reads else store)
        return self.replayed[2]


class InFlight:
    """Runs construction tasks W at a time on private views and commits them in split order:
    ``run_task(task, view, out)`` runs one, ``commit(store, task, ctx, out)`` persists each;
    ``position``: tasks already processed (resume). One ``construction_wave`` event per W
    commits counts the re-runs and what they spent; ``build`` returns the store and totals."""

    def __init__(self, store: MemoryStore, run_task: Callable[..., Awaitable], *, wave_size: int,
                 make_index: IndexBuilder, make_checker: Callable[[], cond_lib.CompositeChecker],
                 log: RunLog, commit: Callable, position: int = 0):
        self.store, self.position, self.wave_size = store, position, wave_size
        self._run_task, self._make_checker = run_task, make_checker
        self._log, self._commit = log, commit
        # one index build per store content, shared by every run and replay that reads it (the
        # index's checker is each reader's own: ``_RecordingIndex``)
        checker = make_checker()
        self._index = functools.lru_cache(min(2 * wave_size + 8, 64))(
            lambda records: make_index(records, checker))
        self._discarded: set[asyncio.Task] = set()
        self.totals = {"wave_size": wave_size, **dict.fromkeys(_COUNTS, 0)}
        self._wave = self._new_wave()

    def _new_wave(self) -> dict:
        return {"wave": self.position // self.wave_size, "tasks": [], "reruns": [],
                "discarded_llm_calls": 0, "discarded_tokens": 0}

    def _launch(self, task) -> _Run:
        view = TaskView(self.store, task.task_id, lambda records, _: self._index(tuple(records)),
                        self._make_checker())
        out = RunOutput()
        return _Run(task, view, out, asyncio.create_task(self._run_task(task, view, out)))

    def _rerun(self, stale: _Run) -> _Run:
        """Discards ``stale`` (counted in the wave) and runs its task on the committed store."""
        stale.future.cancel()
        self._discarded.add(stale.future)
        self._wave["reruns"].append(stale.task.task_id)
        self._wave["discarded_llm_calls"] += sum(stale.out.ledger.calls.values())
        self._wave["discarded_tokens"] += stale.out.ledger.total().total
        return self._launch(stale.task)

    def _close_wave(self) -> None:
        wave = self._wave
        if wave["tasks"]:
            self._log.write("construction_wave", phase="construction",
                            wave_size=self.wave_size, **wave)
            for key in _COUNTS:
                self.totals[key] += wave[key] if key.startswith("discarded") else len(wave[key])
        self._wave = self._new_wave()

    async def build(self, tasks: Iterable) -> tuple[MemoryStore, dict]:
        """Runs ``tasks`` (in split order) and commits them in order; see the class docstring."""
        pending, in_flight = iter(tasks), collections.deque()
        try:
            while True:
                while len(in_flight) < self.wave_size and (task := next(pending, None)) is not None:
                    in_flight.append(self._launch(task))
                if not in_flight:
                    break
                for i in range(min(WINDOW, len(in_flight))):
                    if in_flight[i].replay_on(self.store) is None:
                        in_flight[i] = self._rerun(in_flight[i])
                await self._commit_head(in_flight)
        finally:
            for run in in_flight:
                run.future.cancel()
            await asyncio.gather(*(r.future for r in in_flight), *self._discarded,
                                 return_exceptions=True)
        self._close_wave()
        return self.store, self.totals

    async def _commit_head(self, in_flight: collections.deque) -> None:
        """Commits the run next in line once it is done, re-run first if it is stale (a run
        that raised with fresh reads raises here, as it would have at W = 1)."""
        await asyncio.wait([in_flight[0].future])
        if in_flight[0].replay_on(self.store) is None:
            in_flight[0] = self._rerun(in_flight[0])
            await asyncio.wait([in_flight[0].future])
            if in_flight[0].replay_on(self.store) is None:
                raise RuntimeError(f"construction task {in_flight[0].task.task_id}: a run on "
                                   "the committed store does not replay onto it (retrieval or "
                                   "admission is not deterministic)")
        run = in_flight.popleft()
        ctx = run.future.result()  # raises what it raised: with fresh reads, so would W = 1
        self.store = run.replay_on(self.store)
        self._commit(self.store, run.task, ctx, run.out)
        self._wave["tasks"].append(run.task.task_id)
        self.position += 1
        if self.position % self.wave_size == 0:
            self._close_wave()


_COUNTS = ("tasks", "reruns", "discarded_llm_calls", "discarded_tokens")  # summed over waves
