"""Construction in waves: W construction tasks in flight, committed in split order, the store
identical to the sequential run (paper §3.2–3.3, Algorithm 1 phase 1; issue 14).

Construction is order-dependent: a task retrieves the records earlier tasks admitted, its reuse
observations update their statistic u (which enters the retrieval score, Eq. 8), and Modules I–II
admit its own records under admission and capacity rules that look at the whole store. Up to
``construction.wave_size`` = W tasks run at once, each against a private ``TaskView``: a copy of
the store as committed when the task started, to which only its own admissions and reuse
observations are applied. Everything a task reads from the store is recorded, in order:

  index     per decision, what the condition judge is shown: whether the store is empty and the
            distinct non-empty conditions of the other tasks' records (each may cost an LLM call);
  retrieve  the retrieval result: the candidates (their full records, scores, relevance and
            ranks) and the records excluded as the task's own or by their condition;
  propose   Module II's admission decision for a candidate and the records evicted for it
            (``insert_unverified`` likewise, for the §6.1 "CF without WM" ablation);
  reuse     a reuse observation (and whether its record was still there).

Tasks commit in split order. To commit, a task's reads are replayed against the committed store:
the same operations in the same order, each answer compared with the one the task saw. If all
agree, the sequential run would have shown the task exactly what it saw, so it would have run the
same way (the backbone and the checkers are deterministic functions of what a task sees), and the
store after the replay is the committed store after the task. Otherwise (it would have seen a
record committed earlier in the same wave, a changed reuse statistic, another eviction) it is run
again against the committed store; that run replays by construction, and its LLM calls that did
not change come from the response cache (and single-flight). A run that raised is re-run the
same way when its reads are stale; when they are not, the sequential run would have raised too,
and the error stops the phase.

A run need not wait until its task is next to commit to be found stale, nor be relaunched only
against the committed store: ``replay`` works on the reads made so far, and onto any store.
Whenever a run of the ``EAGER_WINDOW`` runs next to commit finishes, and after every commit,
each of those runs is checked against its guess: the committed store with the changes of the
runs before it that have finished (without raising, their reads replaying onto their own guess)
applied in order; a run still going or stale is taken to change nothing. A run whose reads so
far do not replay onto its guess is discarded and launched again against the guess at once,
overlapping with the others: a record admitted by a run not yet committed is seen by the runs
after it before that run commits, and their condition-judge calls go out then. A guess that
comes true costs nothing more: the run replays onto the committed store when it commits; one
that does not is found stale again later (and, next to commit, against the committed store
itself). Runs further back are checked when they enter the window (relaunched earlier, they
would most likely be made stale again by the runs before them). A stale run that has finished
on cached replies only, while its guess holds the records it was launched on (only reuse
statistics changed), is the exception: its relaunch would most likely only repeat cached
replies, so it waits until its task is next to commit (or the records change). Replays are
remembered per run and store, so a check costs nothing until something changed. The run next
to commit is held to the committed store: it commits when its reads replay onto it, else it is
run again against it, and that run replays by construction, so the queue always advances. A
run's LLM calls queue at the client's concurrency limit with its split position as priority
(``backbones.base.REQUEST_PRIORITY``): the task next to commit is served first.

Condition verdicts are asked ahead (``prejudge``, optional): a new record's condition costs every
later task a judge call before the run can go on, one round trip per new record along the
chain of commits. A verdict depends on the condition and the task only, not on the rest of the
store, so whenever a run finishes (any run in flight, not only the window's) the judge's calls
are made, for every later task in flight, for the conditions of its guess and of every record
a run of an earlier task has admitted so far, committed or not (a speculative run's record
often comes back when its task runs again, and records on one subject share a condition). The
runs then find the replies in the response cache. These calls are charged to no run: they are
counted per wave apart (``prejudged_llm_calls``, ``prejudged_tokens``), those for conditions
that never reach the committed store included. At W = 1 every run asks for itself and none is
made.

A run's log events are held (``runlog.HeldEvents``) and its ledger charges too
(``backbones.base.hold_charges``) until it commits: a discarded run leaves nothing in the log or
the ledger that resume, the metrics or the cost of building read; what it spent is logged per
wave (``construction_wave``: tasks, re-runs, discarded LLM calls and tokens, the judge's calls
made ahead). The store is saved
atomically after every commit with the processed task ids, so a kill mid-wave resumes to the same
final store. W = 1 is the sequential run.
"""
import asyncio
import collections
import dataclasses
import itertools
from typing import Awaitable, Callable, Iterable, Sequence

import numpy as np

from countermem_jax.backbones.base import REQUEST_PRIORITY, book_held, hold_charges
from countermem_jax.memory.store import MemoryStore
from countermem_jax.retrieval import conditions as cond_lib
from countermem_jax.retrieval.retrieve import RetrievalIndex
from countermem_jax.runlog import HeldEvents, RunLog

# (records, checker) -> the retrieval index over them (phases: ``context.retrieval_index``)
IndexBuilder = Callable[[Sequence, cond_lib.CompositeChecker], RetrievalIndex]

# How many runs next to commit are checked for staleness (and relaunched) after each commit;
# the others wait until they come this close (``build_in_waves``). Changes when work is done,
# never what is committed.
EAGER_WINDOW = 8


def _index_read(records, task_id: str, use_conditions: bool) -> tuple:
    """What a decision's condition judge reads from the index (``memory_use``): whether there
    are records at all, and the distinct conditions of the records it could retrieve."""
    conditions = (tuple(dict.fromkeys(r.condition.strip() for r in records
                                      if r.condition.strip() and r.source_task_id != task_id))
                  if use_conditions else ())
    return bool(records), conditions


def _observed(results) -> tuple:
    """What a decision sees of its retrieval results (logged, rendered, fed to the selector)."""
    return tuple((r.candidates, r.excluded_same_task, r.excluded_condition) for r in results)


class _RecordingIndex(RetrievalIndex):
    """A retrieval index over the same records as ``inner`` (its arrays shared, not copied) with
    the task run's own condition checker (its judge's verdicts are the run's), recording every
    retrieval and what it returned in the task view's reads."""

    def __init__(self, inner: RetrievalIndex, checker: cond_lib.CompositeChecker, reads: list):
        self.__dict__.update(inner.__dict__)
        self.checker = checker
        self._reads = reads

    def retrieve_embedded(self, tasks, query_embeddings):
        """``RetrievalIndex.retrieve_embedded``, its query and answer recorded as a read."""
        results = super().retrieve_embedded(tasks, query_embeddings)
        self._reads.append(("retrieve", (tuple(tasks), np.array(query_embeddings, copy=True)),
                            _observed(results)))
        return results


class TaskView:
    """One task run's private view of the store: a copy of the committed store to which only
    this run's admissions and reuse observations are applied, and the log of what it read
    (``reads``: (kind, argument, answer) in order). It is the run's index source (``index``)
    and the store its builder proposes to; ``snapshot_id`` is the committed store's."""

    def __init__(self, committed: MemoryStore, task_id: str, make_index: IndexBuilder,
                 checker: cond_lib.CompositeChecker):
        self.store = committed.copy()
        self.task_id, self.make_index, self.checker = task_id, make_index, checker
        self.reads: list[tuple] = []
        self._version, self._index, self._index_version = 0, None, -1

    @property
    def snapshot_id(self) -> str:
        """The committed store's snapshot id (in the provenance of the records admitted)."""
        return self.store.snapshot_id

    def _current_index(self) -> _RecordingIndex:
        if self._index_version != self._version:  # rebuilt only after a change, as before
            self._index = _RecordingIndex(self.make_index(self.store.records, self.checker),
                                          self.checker, self.reads)
            self._index_version = self._version
        return self._index

    def index(self) -> RetrievalIndex:
        """The index source: the retrieval index over this view, as the run's decisions see it."""
        index = self._current_index()
        self.reads.append(("index", None, _index_read(self.store.records, self.task_id,
                                                      index.use_conditions)))
        return index

    def _admit(self, kind: str, record):
        """An admission on this view through the store's method ``kind``; the decision and the
        records evicted are a read."""
        decision, evicted = getattr(self.store, kind)(record)
        self._version += 1
        self.reads.append((kind, record, (decision, tuple(evicted))))
        return decision, evicted

    def propose(self, record):
        """Module II on this view (``MemoryStore.propose``)."""
        return self._admit("propose", record)

    def insert_unverified(self, record):
        """"CF without WM" storage on this view (``MemoryStore.insert_unverified``, §6.1)."""
        return self._admit("insert_unverified", record)

    def observe_reuse(self, record_id: str, label: int):
        """A reuse observation on this view; whether the record was there is a read."""
        found = record_id in self.store
        self.reads.append(("reuse", (record_id, label), found))
        self._version += found
        return self.store.observe_reuse(record_id, label)  # KeyError, as the store, if gone


def replay(committed: MemoryStore, view: TaskView) -> MemoryStore | None:
    """The committed store after ``view``'s run, if every read of the run gives the same answer
    against ``committed`` (the run is then exactly the sequential run of its task); else None."""
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


class TaskHooks:
    """The construction hooks of one task run: its reuse observations and Modules I–II
    (``builder``, proposing to the run's view) after a failure."""

    def __init__(self, view: TaskView, builder):
        self.view, self.builder = view, builder

    def observe_reuse(self, record_id: str, label: int):
        """u <- (1-ρ)u + ρy for the record used, on the run's view."""
        return self.view.observe_reuse(record_id, label)

    async def after_failure(self, ctx, state_before, action, outcome) -> None:
        """Modules I–II on the failed action (at most ``max_expanded_failures`` per task)."""
        await self.builder.expand(ctx, state_before, action, outcome)


@dataclasses.dataclass
class _Run:
    task: object
    position: int  # in the split
    view: TaskView
    events: HeldEvents
    base: MemoryStore  # the store it was launched on (committed, or a guess of it)
    future: asyncio.Task | None = None
    charges: list = dataclasses.field(default_factory=list)
    known_stale: bool = False  # found stale, left to be relaunched when next to commit
    # the last replay of its reads: onto which store, how many reads, the store after them
    replayed_on: MemoryStore | None = None
    replayed_reads: int = -1
    replayed_to: MemoryStore | None = None
    scanned: int = 0  # reads looked at for admitted conditions (``note_admissions``)

    def replay_on(self, base: MemoryStore) -> MemoryStore | None:
        """``replay(base, view)`` for the reads made so far, remembered until the run reads
        more or is replayed onto another store (stores are compared by identity)."""
        reads = len(self.view.reads)
        if self.replayed_on is not base or self.replayed_reads != reads:
            self.replayed_to = replay(base, self.view) if reads else base
            self.replayed_on, self.replayed_reads = base, reads
        return self.replayed_to

    def finished_cleanly(self) -> bool:
        """Whether the run has ended without raising."""
        return self.future.done() and not self.future.cancelled() and \
            self.future.exception() is None

    async def settle(self):
        """(the task context, None) or (None, the exception the run raised)."""
        try:
            return await self.future, None
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - judged by replay: stale run or a real error
            return None, err


@dataclasses.dataclass
class WaveLog:
    """Per wave (W consecutive tasks of the split): the tasks, the runs of them discarded as
    stale (``reruns``, a task once per discarded run; ``reruns_at_head``: those found stale only
    when the task was next to commit, which the tasks after it waited for), what the discarded
    runs spent (their LLM calls, many of them answered by the response cache), and the
    condition judge's calls made ahead for its tasks (``prejudged_llm_calls``, tokens: replies
    their runs then read from the cache, or calls for conditions they never saw)."""
    wave: int
    tasks: list = dataclasses.field(default_factory=list)
    reruns: list = dataclasses.field(default_factory=list)
    reruns_at_head: list = dataclasses.field(default_factory=list)
    discarded_llm_calls: int = 0
    discarded_tokens: int = 0
    prejudged_llm_calls: int = 0
    prejudged_tokens: int = 0


RunTask = Callable[[object, TaskView, HeldEvents], Awaitable[object]]
# (task, conditions) -> makes the condition judge's calls a run of the task would make for them
Prejudge = Callable[[object, Sequence[str]], Awaitable[None]]


def _record_ids(store: MemoryStore) -> list[str]:
    """Which records the store holds, in order (not their statistics)."""
    return [r.record_id for r in store.records]


async def build_in_waves(store: MemoryStore, tasks: Iterable, run_task: RunTask, *,
                         wave_size: int, make_index: IndexBuilder,
                         make_checker: Callable[[], cond_lib.CompositeChecker], log: RunLog,
                         commit: Callable[[MemoryStore, object, object], None],
                         position: int = 0,
                         prejudge: Prejudge | None = None) -> tuple[MemoryStore, dict]:
    """Runs ``tasks`` (in split order) with up to ``wave_size`` in flight and commits them in
    order; ``run_task(task, view, events)`` runs one task against its view, logging to
    ``events``; ``commit(store, task, ctx)`` persists the committed store after each task.
    ``position``: tasks of the split already processed (resume); ``prejudge(task, conditions)``,
    if given, makes the condition judge's calls a run of ``task`` would make for ``conditions``
    (asked ahead, see the module docstring; its errors are left to the run that asks). Returns
    the final store and the totals (tasks, re-runs, discarded calls and tokens, the calls made
    ahead).

    Whenever a run of the window finishes (and after every commit) the ``EAGER_WINDOW`` runs next
    to commit are checked against the store their task will most likely commit onto: the
    committed store with the changes of the finished runs before it applied, in order
    (``guesses``). A run whose reads so far no longer replay onto its guess is discarded and
    launched again against it at once (unless it has finished on cached replies only and the
    guess holds the records it was launched on, only reuse statistics changed: see
    ``speculate``), so that it overlaps with the others instead of starting only when the runs
    before it commit. Only the run next to commit is held to the committed store itself: it
    commits when its reads replay onto it, else it is run again against it, and that run
    replays by construction, so the queue always advances."""
    if wave_size < 1:
        raise ValueError(f"construction.wave_size must be >= 1, got {wave_size}")
    pending = iter(tasks)
    in_flight: collections.deque[_Run] = collections.deque()
    totals = {"wave_size": wave_size, "tasks": 0, "reruns": 0, "reruns_at_head": 0,
              "discarded_llm_calls": 0, "discarded_tokens": 0, "prejudged_llm_calls": 0,
              "prejudged_tokens": 0}
    # Open waves by number: the one committing and the next (W tasks in flight at most).
    waves: dict[int, WaveLog] = {}
    queued = position  # split position of the next task to launch
    latest_guess = store  # the store after the window's finished runs (new runs start on it)

    # cancelled stale runs still winding down, awaited at the end (dropped once done)
    abandoned: set[asyncio.Task] = set()
    # conditions whose judge calls were made ahead for a split position (``prejudge_ahead``)
    prejudged: dict[int, set[str]] = collections.defaultdict(set)
    first_admitted: dict[str, int] = {}  # condition -> first split position a run admitted it at
    prejudging: dict[int, list] = collections.defaultdict(list)  # (asyncio task, its charges)
    if prejudge is not None and not make_index((), make_checker()).use_conditions:
        prejudge = None  # the judge is shown no condition (config): nothing to ask ahead
    indexes: dict[tuple, RetrievalIndex] = {}  # by the records (frozen dataclasses: content)

    def shared_index(records, checker) -> RetrievalIndex:
        """One index build per store content for all the runs and replays that read it."""
        key = tuple(records)
        if key not in indexes:
            if len(indexes) >= min(2 * wave_size + 8, 64):
                del indexes[next(iter(indexes))]
            indexes[key] = make_index(records, checker)
        return indexes[key]

    def wave_of(at: int) -> WaveLog:
        return waves.setdefault(at // wave_size, WaveLog(at // wave_size))

    def launch(task, at: int, base: MemoryStore) -> _Run:
        run = _Run(task, at, TaskView(base, task.task_id, shared_index, make_checker()),
                   HeldEvents(log), base)

        async def body():
            run.charges = hold_charges()  # this run's context only
            REQUEST_PRIORITY.set(at)  # the task next to commit is served first
            return await run_task(task, run.view, run.events)
        run.future = asyncio.create_task(body())
        return run

    def fill() -> None:
        nonlocal queued
        while len(in_flight) < wave_size:
            task = next(pending, None)
            if task is None:
                return
            in_flight.append(launch(task, queued, latest_guess))
            queued += 1

    def wound_down(future: asyncio.Task) -> None:
        """A discarded run has ended: forgotten, its error (its own, being stale) retrieved."""
        abandoned.discard(future)
        if not future.cancelled():
            future.exception()

    def rerun(stale: _Run, base: MemoryStore) -> _Run:
        """Discards a stale run (its held events and charges; counted in its wave's log) and
        runs its task again against ``base``."""
        stale.future.cancel()
        abandoned.add(stale.future)
        stale.future.add_done_callback(wound_down)
        wave = wave_of(stale.position)
        wave.reruns.append(stale.task.task_id)
        wave.discarded_llm_calls += len(stale.charges)
        wave.discarded_tokens += sum(usage.total for _, _, usage, _ in stale.charges)
        return launch(stale.task, stale.position, base)

    def speculate() -> None:
        """Checks the ``EAGER_WINDOW`` runs next to commit, in order, each against its guess:
        the committed store for the first, and for each next one the store after the runs
        before it that have finished without raising and replay onto their own guess (a run
        still going, stale or raising is taken to change nothing). A run whose reads so far do
        not replay onto its guess is relaunched against it now. The exception is a run that
        has finished on cached replies only while its guess holds the records it was launched
        on (only reuse statistics differ): its relaunch would most likely repeat those
        replies and may well be made stale again, so it waits until its task is next to
        commit. Runs further back are checked once they enter the window (relaunched earlier,
        they would most likely be made stale again by the runs before them). Replays are
        remembered per run and store, so a check costs nothing until something changed. With
        ``prejudge``, the judge's calls for the runs in flight are then asked ahead
        (``prejudge_ahead``)."""
        nonlocal latest_guess
        if prejudge is not None:
            note_admissions()  # before a stale run is discarded below
        guesses: dict[int, MemoryStore] = {}
        guess = store
        for i in range(min(EAGER_WINDOW, len(in_flight))):
            run = in_flight[i]
            guesses[run.position] = guess
            after = None if run.known_stale else run.replay_on(guess)
            if after is None:
                if run.future.done() and all(cached for *_, cached in run.charges) and \
                        _record_ids(run.base) == _record_ids(guess):
                    run.known_stale = True
                else:
                    in_flight[i] = rerun(run, guess)
            elif run.finished_cleanly():
                guess = after
        latest_guess = guess
        if prejudge is not None:
            prejudge_ahead(guesses)

    def note_admissions() -> None:
        """Notes the conditions of the records the runs in flight have admitted since the last
        look, with the first split position that admitted each (``prejudge_ahead``)."""
        for run in in_flight:
            reads = run.view.reads
            for kind, record, answer in itertools.islice(reads, run.scanned, None):
                condition = record.condition.strip() if kind in ("propose",
                                                                 "insert_unverified") else ""
                if condition and answer[0].admitted:
                    first_admitted[condition] = min(first_admitted.get(condition, run.position),
                                                    run.position)
            run.scanned = len(reads)

    def prejudge_ahead(guesses: dict[int, MemoryStore]) -> None:
        """Makes, for every run in flight, the condition judge's calls its task will most
        likely make and has not made yet: for the conditions of its guess (the latest guess
        for the runs past the window) and for those of the records any run of an earlier task
        has admitted so far, committed or not (a speculative run's record often comes back
        when its task runs again, or another task's record on the same subject has the same
        condition). A verdict depends on the condition and the task only, never on the rest of
        the store, so when the task reads the condition its judge's reply comes from the
        response cache; a run launched on its guess asks the guess's conditions itself. The
        calls are counted apart in the wave log (``prejudged_llm_calls``, ``prejudged_tokens``),
        those for conditions that never reach the committed store included."""
        for run in in_flight:
            guess = guesses.get(run.position, latest_guess)
            asked = prejudged[run.position]
            _, in_guess = _index_read(guess.records, run.task.task_id, True)
            if run.base is guess:  # its run asks them itself
                asked.update(in_guess)
            earlier = tuple(c for c, at in first_admitted.items() if at < run.position)
            new = [c for c in dict.fromkeys(in_guess + earlier) if c not in asked]
            if new:
                asked.update(new)
                start_prejudge(run.task, run.position, new)

    def start_prejudge(task, at: int, conditions: list[str]) -> None:
        held: list = []

        async def body():
            held.append(hold_charges())  # booked by no one: the run that asks is charged
            REQUEST_PRIORITY.set(at)
            try:
                await prejudge(task, conditions)
            except Exception:  # noqa: BLE001 - the run making the same call meets the error
                pass
        prejudging[at].append((asyncio.create_task(body()), held))

    def end_prejudges(at: int) -> None:
        """The task at ``at`` commits: its judge calls made ahead that are still going are
        cancelled (an identical call its run joined keeps going), what they spent is counted
        in its wave, and which conditions were asked for it is forgotten."""
        prejudged.pop(at, None)
        wave = wave_of(at)
        for future, held in prejudging.pop(at, ()):
            if not future.done():
                future.cancel()
                abandoned.add(future)
                future.add_done_callback(wound_down)
            charges = held[0] if held else []
            wave.prejudged_llm_calls += len(charges)
            wave.prejudged_tokens += sum(usage.total for _, _, usage, _ in charges)

    async def next_change() -> None:
        """Waits until a run of the window finishes (the next to commit among them), or with
        ``prejudge`` any run in flight (its records' conditions are then judged ahead)."""
        watched = in_flight if prejudge is not None else \
            itertools.islice(in_flight, EAGER_WINDOW)
        going = [run.future for run in watched if not run.future.done()]
        if going:
            await asyncio.wait(going, return_when=asyncio.FIRST_COMPLETED)

    def close_wave(number: int) -> None:
        wave = waves.pop(number, None)
        if wave is None:
            return
        if wave.tasks:
            log.write("construction_wave", phase="construction", wave_size=wave_size,
                      **dataclasses.asdict(wave))
        totals["tasks"] += len(wave.tasks)
        for key in ("reruns", "reruns_at_head"):
            totals[key] += len(getattr(wave, key))
        for key in ("discarded_llm_calls", "discarded_tokens", "prejudged_llm_calls",
                    "prejudged_tokens"):
            totals[key] += getattr(wave, key)

    try:
        fill()
        while in_flight:
            speculate()
            run = in_flight[0]
            if not run.future.done():
                await next_change()
                continue
            if run.known_stale:  # it read what the sequential order would not have shown it
                run = in_flight[0] = rerun(run, store)
                wave_of(run.position).reruns_at_head.append(run.task.task_id)
                await asyncio.wait([run.future])
                if run.replay_on(store) is None:
                    raise RuntimeError(f"construction task {run.task.task_id}: a run against the "
                                       "committed store does not replay onto it (retrieval or "
                                       "admission is not deterministic)")
            ctx, error = await run.settle()
            if error is not None:
                raise error
            after = run.replay_on(store)
            in_flight.popleft()
            run.events.commit()
            book_held(run.charges)
            store = after
            commit(store, run.task, ctx)
            end_prejudges(position)
            wave_of(position).tasks.append(run.task.task_id)
            position += 1
            if position % wave_size == 0:
                close_wave(position // wave_size - 1)
            fill()
        close_wave(position // wave_size)
    finally:
        for run in in_flight:
            run.future.cancel()
        for calls in prejudging.values():
            for future, _ in calls:
                future.cancel()
        await asyncio.gather(*(run.future for run in in_flight), *abandoned,
                             *(future for calls in prejudging.values() for future, _ in calls),
                             return_exceptions=True)
    return store, totals
