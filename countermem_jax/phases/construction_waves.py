"""Construction in flight: W tasks at once, each on a private view of the store, committed in split
order; the store, log and costs are the sequential run's (§3.2–3.3; docs/concurrency.md)."""
import asyncio
import collections
import contextlib
import functools
from typing import Awaitable, Callable, Iterable

import numpy as np

from countermem_jax.backbones.base import TokenLedger
from countermem_jax.method.memory.store import MemoryStore
from countermem_jax.method.memory_use import judged_conditions
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.method.conditions import checkers as cond_lib
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.runtime.runlog import EventBuffer, RunLog

# Runs next in line checked after each commit: changes how much is redone, never the result.
WINDOW = 8


class TaskView:
    """One run's private copy of the committed store, which it retrieves from and admits into;
    what the run read (``reads``: (kind, argument, answer) in order) and what it writes, kept
    until it commits: log ``events``, parse ``failures`` and charges (``ledger``)."""

    def __init__(self, committed: MemoryStore, task_id: str, make_index: Callable,
                 checker: cond_lib.CompositeChecker):
        self.store = committed.copy()
        self.snapshot_id = committed.snapshot_id  # in the provenance of the records admitted
        self.task_id, self.make_index, self.checker = task_id, make_index, checker
        self.reads: list[tuple] = []
        self.events, self.failures, self.ledger = EventBuffer(), ParseFailureLog(), TokenLedger()
        self._index = None  # built on first use after each change of the view

    def commit(self, log: RunLog, failures: ParseFailureLog, ledger: TokenLedger) -> None:
        """Appends the events to ``log`` (one durable write), then books failures and charges."""
        log.write_all(self.events)
        failures.merge(self.failures)
        ledger.merge(self.ledger)

    def _current_index(self) -> RetrievalIndex:
        """The index over this view (arrays shared with every view of the same store content)
        with the run's own checker; each retrieval is a read."""
        if self._index is None:
            self._index = self.make_index(self.store.records, self.checker).with_checker(
                self.checker, on_retrieve=self._read_retrieval)
        return self._index

    def _read_retrieval(self, tasks, query_embeddings, results) -> None:
        self.reads.append(("retrieve", (tuple(tasks), np.array(query_embeddings, copy=True)),
                           tuple((r.candidates, r.excluded_same_task, r.excluded_condition)
                                 for r in results)))

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

    propose = functools.partialmethod(_admit, "propose")  # Module II on this view
    # "CF without WM" storage (§6.1) on this view
    insert_unverified = functools.partialmethod(_admit, "insert_unverified")

    def observe_reuse(self, record_id: str, label: int):
        """A reuse observation on this view; whether the record was there is a read."""
        found = record_id in self.store
        self.reads.append(("reuse", (record_id, label), found))
        if found:  # the record's statistic u changes its retrieval score (Eq. 8)
            self._index = None
        return self.store.observe_reuse(record_id, label)  # KeyError, as the store, if gone


def replay(committed: MemoryStore, view: TaskView) -> MemoryStore | None:
    """``committed`` after ``view``'s run if each read gives the same answer there, else None."""
    twin = TaskView(committed, view.task_id, view.make_index, view.checker)
    for kind, argument, answer in view.reads:
        if kind == "index":
            twin.index()
        elif kind == "retrieve":
            twin._current_index().retrieve_embedded(*argument)
        elif kind == "reuse":
            with contextlib.suppress(KeyError):  # recorded as not found; compared below
                twin.observe_reuse(*argument)
        else:
            twin._admit(kind, argument)
        if twin.reads[-1][2] != answer:
            return None
    return twin.store


class _Run:
    """One run of ``task`` on a view of ``flight``'s store, as committed at ``started_at``."""

    def __init__(self, flight: "InFlight", task):
        self.task, self.started_at = task, flight.position
        self.view = TaskView(flight.store, task.task_id, flight.make_index, flight.make_checker())
        self.future = asyncio.create_task(flight.run_task(task, self.view))
        self.replayed = (None, -1, None)  # (store, reads replayed, store after) of the last replay

    def replay_on(self, store: MemoryStore) -> MemoryStore | None:
        """``replay(store, view)``, remembered until the run reads more or the store changes."""
        reads = len(self.view.reads)
        if self.replayed[0] is not store or self.replayed[1] != reads:
            self.replayed = (store, reads, replay(store, self.view) if reads else store)
        return self.replayed[2]


class InFlight:
    """Runs construction tasks W at a time: ``run_task(task, view)`` runs one, ``commit(store,
    task, ctx, view)`` persists each in split order; ``position``: tasks already processed (resume);
    ``totals`` sums the ``construction_wave`` events (re-runs and what they spent)."""

    def __init__(self, store: MemoryStore, run_task: Callable[..., Awaitable], *, wave_size: int,
                 make_index: Callable, make_checker: Callable[[], cond_lib.CompositeChecker],
                 log: RunLog, commit: Callable, position: int = 0):
        self.store, self.position, self.wave_size = store, position, wave_size
        self.run_task, self.make_checker = run_task, make_checker
        self._log, self._commit = log, commit
        # one index per store content, shared by every run and replay (each with its own checker)
        checker = make_checker()
        shared = functools.lru_cache(min(2 * wave_size + 8, 64))(
            lambda records: make_index(records, checker))
        self.make_index = lambda records, _: shared(tuple(records))
        self._discarded: list[asyncio.Task] = []
        self._wave = {"tasks": [], "reruns": [], "discarded_llm_calls": 0, "discarded_tokens": 0}
        self.totals = {"wave_size": wave_size} | dict.fromkeys(self._wave, 0)

    def _rerun(self, stale: _Run) -> _Run:
        """Discards ``stale`` (counted in the wave) and runs its task on the committed store."""
        if stale.started_at == self.position:  # nothing committed since it started
            raise RuntimeError(f"construction task {stale.task.task_id}: retrieval or admission is "
                               "not deterministic (a run does not replay on the store it ran on)")
        stale.future.cancel()
        self._discarded.append(stale.future)
        self._wave["reruns"].append(stale.task.task_id)
        self._wave["discarded_llm_calls"] += sum(stale.view.ledger.calls.values())
        self._wave["discarded_tokens"] += stale.view.ledger.total().total
        return _Run(self, stale.task)

    def _close_wave(self) -> None:  # logs the tasks committed since the last wave, adds to totals
        if self._wave["tasks"]:
            self._log.write("construction_wave", phase="construction", wave_size=self.wave_size,
                            wave=(self.position - 1) // self.wave_size, **self._wave)
            for key, value in self._wave.items():
                self.totals[key] += value if isinstance(value, int) else len(value)
        self._wave = {key: type(value)() for key, value in self._wave.items()}  # [] and 0

    async def build(self, tasks: Iterable) -> tuple[MemoryStore, dict]:
        """Runs ``tasks`` and commits them in split order; returns the store and ``totals``."""
        pending, in_flight = iter(tasks), collections.deque()
        try:
            while True:
                while len(in_flight) < self.wave_size and (task := next(pending, None)) is not None:
                    in_flight.append(_Run(self, task))
                if not in_flight:
                    break
                for i in range(min(WINDOW, len(in_flight))):
                    if in_flight[i].replay_on(self.store) is None:
                        in_flight[i] = self._rerun(in_flight[i])
                await asyncio.wait([in_flight[0].future])
                while in_flight[0].replay_on(self.store) is None:  # it read more, and went stale
                    in_flight[0] = self._rerun(in_flight[0])
                    await asyncio.wait([in_flight[0].future])
                run = in_flight.popleft()
                ctx = run.future.result()  # raises what it raised: with fresh reads, so would W = 1
                self.store = run.replay_on(self.store)
                self._commit(self.store, run.task, ctx, run.view)
                self._wave["tasks"].append(run.task.task_id)
                self.position += 1
                if self.position % self.wave_size == 0:
                    self._close_wave()
        finally:
            for run in in_flight:
                run.future.cancel()
            await asyncio.gather(*(r.future for r in in_flight), *self._discarded,
                                 return_exceptions=True)
        self._close_wave()
        return self.store, self.totals
