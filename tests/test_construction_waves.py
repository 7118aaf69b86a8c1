"""Construction in flight: W tasks at once, the store byte-identical to W = 1.

A people database with four kinds of questions (inclusive lower / upper bounds, strict bounds, and
an "or more" phrasing whose records carry a free-text condition the LLM judge decides), a store of
capacity 2 (evictions), and a scripted backbone that revises a draft only with a record of the
matching operator: later tasks retrieve, reuse (helpfully or not) and re-admit records admitted
by earlier ones, so a concurrent run has reads that go stale and must be re-run.
"""
import asyncio
import collections
import datetime
import hashlib
import json
import re
import types
import uuid

import helpers
import pytest

from countermem_jax.phases import construction_waves as waves
from countermem_jax.method import counterfactual
from countermem_jax import experiment
from countermem_jax.protocol import metrics
from benchmarks.testing.scripted_backbone import Rule, ScriptedBackbone
from helpers import default_config
from countermem_jax.backbones.base import Charge, TokenLedger, Usage
from countermem_jax.method.memory import load_frozen, load_store
from countermem_jax.method.memory import store as store_lib
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.method.conditions import checkers as cond_lib
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.runtime.runlog import RunLog

KINDS = {  # question, gold operator, drafted operator
    "least": ("List the names of people aged at least {n}.", ">=", ">"),
    "most": ("List the names of people aged at most {n}.", "<=", "<"),
    "strict": ("Which people are strictly above {n} years old? Give their names.", ">", ">"),
    "more": ("Name every person whose age is {n} or more.", ">=", ">"),
}
BUILD = [("more", 35), ("least", 30), ("strict", 35), ("least", 45), ("most", 40), ("least", 50),
         ("most", 30), ("strict", 45), ("more", 50), ("least", 35), ("most", 50), ("more", 40),
         ("least", 40), ("strict", 30), ("most", 45), ("least", 55)]
OTHER = {"train": [("least", 25)], "validation": [("most", 35)], "eval": [("strict", 50)]}
FREE_TEXT = "the request also counts people whose age equals the threshold"


def _tid(kind, n, part="b"):
    return f"{part}-{kind}-{n}"


def _questions():
    out = {_tid(k, n): (k, n) for k, n in BUILD}
    for part, items in OTHER.items():
        out.update({_tid(k, n, part[0]): (k, n) for k, n in items})
    return out


QUESTIONS = _questions()
MANIFEST = {"build": [_tid(k, n) for k, n in BUILD],
            **{part: [_tid(k, n, part[0]) for k, n in items] for part, items in OTHER.items()}}


@pytest.fixture
def people(tmp_path):
    questions = {}
    for tid, (kind, n) in QUESTIONS.items():
        question, gold, _ = KINDS[kind]
        questions[tid] = (question.format(n=n), f"{gold} {n}")
    return helpers.people_benchmark(tmp_path, questions)


def _alternatives(messages):
    op, n = re.search(r"age ([<>]) (\d+)", messages[-1]["content"]).groups()
    return f"EDIT 1\nFIND: age {op} {n}\nREPLACE: age {op}= {n}"


def _distil(messages):
    if "or more" in messages[-1]["content"]:
        return f"SITUATION: an 'or more' threshold was written as strict\nCONDITION: {FREE_TEXT}"
    return ("SITUATION: an inclusive threshold was written as a strict comparison\n"
            "CONDITION: bound == inclusive")


def _revise(messages):
    """Applies a record only to a draft with the record's operator (an 'at least' record leaves
    an 'at most' draft unchanged: a use with label 0, the task fails and expands)."""
    text = messages[-1]["content"]
    draft = re.search(r"Your draft action:\n```\n(.*?)\n```", text, re.S).group(1)
    improved = re.search(r"improved action: (.*)", text).group(1)
    for strict, inclusive in (("age > ", "age >= "), ("age < ", "age <= ")):
        if inclusive in improved:
            draft = draft.replace(strict, inclusive)
    return f"```sql\n{draft}\n```"


def _judge(messages):
    task = messages[-1]["content"].split("<task>")[1]
    return "YES" if re.search(r"at least|or more|at most", task) else "NO"


def scripted(crash_after: int | None = None) -> ScriptedBackbone:
    """The deterministic backbone; ``crash_after``: every call after that many calls raises."""
    fake = ScriptedBackbone()
    if crash_after is not None:
        count = {"calls": 0}

        def crash(messages):
            raise Killed(f"killed after {crash_after} calls")

        def counting(charge, messages):
            count["calls"] += 1
            return count["calls"] > crash_after
        fake.rules.append(Rule(crash))
        fake.rules[-1].matches = counting
    for tid, (kind, n) in QUESTIONS.items():
        _, _, op = KINDS[kind]
        fake.add(f"```sql\nSELECT name FROM people WHERE age {op} {n}\n```",
                 template="DRAFT_ACTION", task=f"/{tid}#")
    fake.add(_alternatives, template="GENERATE_LOCAL_ALTERNATIVES")
    fake.add(_distil, template="DISTIL_RECORD")
    fake.add(_revise, template="REVISE_WITH_RECORD")
    fake.add(_judge, template="CONDITION_JUDGE")
    return fake


class Killed(RuntimeError):
    pass


@pytest.fixture
def pinned(monkeypatch):
    """Pins the only inputs of a store file that are not functions of the tasks and the
    backbone: the snapshot id (a random uuid) and the records' creation time."""
    monkeypatch.setattr(store_lib.uuid, "uuid4", lambda: uuid.UUID(int=0xC0FFEE))

    class _Clock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime(2026, 11, 23, 5, 0, 0, tzinfo=tz)
    monkeypatch.setattr(counterfactual, "datetime",
                        types.SimpleNamespace(datetime=_Clock, timezone=datetime.timezone))


def _config(tmp_path, wave_size=None):
    c = default_config()
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    c.splits.manifest = str(tmp_path / "manifest.json")
    c.agent.max_attempts = 2
    c.memory.capacity = 2
    if wave_size is not None:
        c.construction.wave_size = wave_size
    return c


def _build(tmp_path, people, name, wave_size=None, backbone=None):
    wd = tmp_path / name
    experiment.build_memory(_config(tmp_path, wave_size), wd, backbone=backbone or scripted(),
                            benchmark=people)
    return wd


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _waves(wd):
    return RunLog(wd / "log.jsonl").events("construction_wave")


def _without_timing(events):
    """Log events with their wall-clock fields removed (the only fields a run's timing sets)."""
    out = []
    for e in events:
        e = json.loads(json.dumps(e))
        if "outcome" in e:
            e["outcome"].pop("wall_time", None)
        out.append(e)
    return out


def _construction_events(wd):
    log = RunLog(wd / "log.jsonl")
    events = {kind: _without_timing(log.events(kind))
              for kind in ("decision", "counterfactual", "task_end")}
    assert [e["task_id"] for e in events["task_end"]] == MANIFEST["build"]
    assert len(events["decision"]) > len(BUILD) and events["counterfactual"]
    return events


# Hashes of the files the sequential build writes (this scenario, pinned snapshot id and clock),
# first pinned before construction in waves existed (main at c6b3308) and pinned again when Modules
# I-II stopped checking an alternative twice within one task (a deliberate change of the method),
# and again when records came to carry their source's reference group and the SQL checker its
# version 2 (issue 36: same decisions and records; new fields and feedback wording only), and
# again when records came to carry the world they were verified in (issue 38: ``verified_under``,
# the checker version and the database's sha256; with it left out the earlier hashes hold).
SEQUENTIAL_STORE_SHA256 = "16faf15d3650f424e562b6c41ebf03a703d0581f06dad561623ec84f66697f29"
SEQUENTIAL_FROZEN_SHA256 = "4cc555eb3c1fcd9c4dc4317ab944cc26419e5571471e59e896b2a67bcb66fbbc"


def test_one_task_in_flight_is_the_sequential_build(tmp_path, people, pinned):
    wd = _build(tmp_path, people, "w1", wave_size=1)
    assert _sha(wd / "store.jsonl") == SEQUENTIAL_STORE_SHA256
    assert _sha(wd / "store_frozen.jsonl") == SEQUENTIAL_FROZEN_SHA256
    waves = _waves(wd)
    assert [w["tasks"] for w in waves] == [[t] for t in MANIFEST["build"]]
    assert all(w["reruns"] == [] and w["discarded_llm_calls"] == 0 for w in waves)


@pytest.mark.parametrize("wave_size", [4, 64])
def test_many_tasks_in_flight_build_the_store_of_one(tmp_path, people, pinned, wave_size):
    one = _build(tmp_path, people, "w1", wave_size=1)
    many = _build(tmp_path, people, f"w{wave_size}", wave_size=wave_size)
    for name in ("store.jsonl", "store_frozen.jsonl", "store_frozen.sha256"):
        assert (many / name).read_bytes() == (one / name).read_bytes(), name
    store = load_frozen(many / "store_frozen.jsonl")
    assert store.evictions > 0 and sum(r.uses for r in store.records) > 0
    waves = _waves(many)
    assert [t for w in waves for t in w["tasks"]] == MANIFEST["build"]
    assert [len(w["tasks"]) for w in waves] == \
        [min(wave_size, len(BUILD) - i) for i in range(0, len(BUILD), wave_size)]
    reruns = [t for w in waves for t in w["reruns"]]
    assert reruns and sum(w["discarded_llm_calls"] for w in waves) > 0
    if wave_size == 4:  # some speculative runs saw exactly the sequential store and committed
        assert len(set(reruns)) < len(BUILD) - 1
    # The committed runs' log is the sequential run's: decisions (retrievals, judge verdicts,
    # reuse labels), counterfactual checks and admissions, task ends; so is the cost of building.
    assert _construction_events(many) == _construction_events(one)
    cost = [metrics.building_cost(RunLog(wd / "log.jsonl").events("task_end"))
            for wd in (one, many)]
    assert cost[0] == cost[1] and cost[0]["construction"]["tokens"] > 0
    ends = {wd: RunLog(wd / "log.jsonl").events("phase_end")[-1] for wd in (one, many)}
    # discarded runs' calls are not booked: the ledger is the sequential build's
    assert ends[many]["tokens"] == ends[one]["tokens"]
    assert ends[many]["ledger"] == ends[one]["ledger"]
    assert ends[many]["waves"]["reruns"] == len(reruns)


def test_a_kill_mid_wave_resumes_to_the_same_store(tmp_path, people, pinned):
    reference = _build(tmp_path, people, "ref", wave_size=1)
    wd = tmp_path / "killed"
    with pytest.raises(Killed):
        experiment.build_memory(_config(tmp_path, 8), wd, backbone=scripted(crash_after=40),
                                benchmark=people)
    partial = load_store(wd / "store.jsonl")
    processed = partial.meta["processed_tasks"]
    assert 0 < len(processed) < len(BUILD)
    assert not (wd / "store_frozen.jsonl").exists()
    # resumed with another wave size: it is not part of the workdir's fingerprint
    experiment.build_memory(_config(tmp_path, 3), wd, backbone=scripted(), benchmark=people)
    for name in ("store.jsonl", "store_frozen.jsonl"):
        assert (wd / name).read_bytes() == (reference / name).read_bytes(), name
    # No event of an unfinished or discarded run reached the log: every task ended once.
    ends = [e["task_id"] for e in RunLog(wd / "log.jsonl").events("task_end")]
    assert ends == MANIFEST["build"]
    assert _construction_events(wd) == _construction_events(reference)


def test_a_stale_run_that_raised_is_re_run_not_fatal(tmp_path, people, pinned):
    """In sequence, b-least-30 reuses b-more-35's record and is solved at once; run against the
    empty store it fails and expands, and here that call raises. Its reads were stale, so the
    error is the stale run's own: the task is re-run and the build completes."""
    reference = _build(tmp_path, people, "ref", wave_size=1)
    backbone = scripted()

    def boom(messages):
        raise Killed("only a stale run of b-least-30 expands a failure")
    backbone.rules.insert(0, Rule(boom, template="GENERATE_LOCAL_ALTERNATIVES",
                                  task="/b-least-30#"))
    wd = _build(tmp_path, people, "w64", wave_size=64, backbone=backbone)
    assert (wd / "store_frozen.jsonl").read_bytes() == \
        (reference / "store_frozen.jsonl").read_bytes()
    assert "b-least-30" in [t for w in _waves(wd) for t in w["reruns"]]
    assert any(c.purpose == "GENERATE_LOCAL_ALTERNATIVES" and "/b-least-30#" in c.decision
               for c, _ in backbone.calls)  # the stale run did raise


def test_a_negative_wave_size_is_refused(tmp_path, people):
    with pytest.raises(Exception, match=r"construction\.wave_size=-1 must be >= 0"):
        experiment.build_memory(_config(tmp_path, -1), tmp_path / "wd", backbone=scripted(),
                                benchmark=people)
    assert not (tmp_path / "wd" / "store.jsonl").exists()


def test_wave_size_zero_keeps_as_many_tasks_in_flight_as_the_servers_hold(tmp_path, people,
                                                                          pinned):
    """0 (the GPU configs) is the client's in-flight limit, read when the phase starts; the
    store is the one of W = 1."""
    one = _build(tmp_path, people, "w1", wave_size=1)
    backbone = scripted()
    backbone.max_concurrency = 5   # what the client allows: the URL file's replicas hold 5
    auto = _build(tmp_path, people, "auto", wave_size=0, backbone=backbone)
    assert [len(w["tasks"]) for w in _waves(auto)] == [5, 5, 5, 1]
    assert RunLog(auto / "log.jsonl").events("phase_start")[0]["wave_size"] == 5
    for name in ("store.jsonl", "store_frozen.jsonl"):
        assert (auto / name).read_bytes() == (one / name).read_bytes(), name


def test_the_servers_hold_what_the_url_file_says(tmp_path):
    """The wave of 0 through the real client: the URL file's sum of max_num_seqs, under the
    configured cap; a backbone without a limit (llama.cpp, scripted) runs one task at a time."""
    from countermem_jax.backbones.cache import CachedBackbone
    from countermem_jax.backbones.factory import make_backbone
    from countermem_jax.phases import wave_sizes
    urls = tmp_path / "vllm_urls.txt"
    urls.write_text("http://127.0.0.1:9/v1 max_num_seqs=48\nhttp://127.0.0.1:10/v1 "
                    "max_num_seqs=16\n")
    cfg = default_config().backbone
    cfg.update(kind="openai", base_urls=str(urls), model="m", max_concurrency=1024,
               cache_dir=str(tmp_path / "cache"))
    backbone = make_backbone(cfg)
    assert isinstance(backbone, CachedBackbone)
    assert wave_sizes.construction_wave(0, backbone) == 64
    assert wave_sizes.construction_wave(3, backbone) == 3
    cfg.max_concurrency = 40
    assert wave_sizes.construction_wave(0, make_backbone(cfg)) == 40
    assert wave_sizes.construction_wave(0, scripted()) == 1


# ----------------------------------------------------------------------------- the replay rule
def _view(store, task_id):
    checker = cond_lib.CompositeChecker()
    return waves.TaskView(store, task_id, lambda records, c: RetrievalIndex(records, checker=c),
                          checker)


def test_a_read_the_sequential_order_would_have_answered_otherwise_is_stale(record_factory):
    """B looked at the store before A's record was committed: B is re-run. D only observed a
    reuse of a record A did not touch: D commits as it ran, after A, as in the sequential run."""
    old = record_factory(source_task_id="t0")
    empty = store_lib.MemoryStore(helpers.paper("store"))
    start = store_lib.MemoryStore(helpers.paper("store"), records=[old])
    a, b = _view(empty, "a"), _view(empty, "b")
    a.propose(record_factory(source_task_id="a"))
    b.index()
    b.propose(record_factory(source_task_id="b", situation="another situation"))
    after_a = waves.replay(empty, a)
    assert [r.source_task_id for r in after_a.records] == ["a"]
    assert waves.replay(after_a, b) is None  # the sequential B would have seen A's record
    assert waves.replay(empty, b) is not None  # against what it saw, B replays

    a, d = _view(start, "a"), _view(start, "d")
    a.propose(record_factory(source_task_id="a", situation="a different situation",
                             improved="SELECT name FROM people WHERE age >= 19"))
    d.observe_reuse(old.record_id, 1)
    after_a = waves.replay(start, a)
    after_d = waves.replay(after_a, d)
    sequential = start.copy()
    sequential.propose(a.reads[0][1])
    sequential.observe_reuse(old.record_id, 1)
    assert after_d.content_hash() == sequential.content_hash()
    assert after_d.next_seq == sequential.next_seq and after_d.records[0].uses == 1

    # A reuse of a record that an earlier commit evicted is stale too.
    e = _view(start, "e")
    e.observe_reuse(old.record_id, -1)
    assert waves.replay(store_lib.MemoryStore(helpers.paper("store")), e) is None


def test_the_condition_filter_is_the_decisions(record_factory):
    """The index read records what the condition judge is shown (``judged_conditions``): the
    distinct conditions of the other tasks' records, none when the index ignores conditions."""
    records = [record_factory(source_task_id="a", condition=" c1 "),
               record_factory(source_task_id="b", condition="c1", situation="s2"),
               record_factory(source_task_id="b", condition="c2", situation="s3"),
               record_factory(source_task_id="me", condition="mine", situation="s4")]
    view = _view(store_lib.MemoryStore(helpers.paper("store"), records=records), "me")
    view.index()
    assert view.reads[-1] == ("index", None, (True, ("c1", "c2")))
    ignoring = waves.TaskView(store_lib.MemoryStore(helpers.paper("store"), records=records), "me",
                              lambda rs, c: RetrievalIndex(rs, checker=c, use_conditions=False),
                              cond_lib.CompositeChecker())
    ignoring.index()
    assert ignoring.reads[-1] == ("index", None, (True, ()))


# ------------------------------------------------------------------------ stale runs re-run
def _unit_build(tmp_path, wave_size, steps, tasks, order, initial=()):
    """``InFlight`` from a store of the records ``initial`` over ``tasks`` (ids) with the
    scripted step ``steps[id](view, order)`` as each task's run; ``order`` gets ("start", id)
    per launch and ("commit", id) per commit. Returns the final store and the wave events."""
    def run_task(task, view):
        order.append(("start", task.task_id))
        return steps[task.task_id](view, order)

    log = RunLog(tmp_path / f"log-{wave_size}.jsonl")
    store, _ = asyncio.run(waves.InFlight(
        store_lib.MemoryStore(helpers.paper("store"), records=initial), run_task,
        wave_size=wave_size,
        make_index=lambda records, c: RetrievalIndex(records, checker=c),
        make_checker=cond_lib.CompositeChecker, log=log,
        commit=lambda committed, task, ctx, view: order.append(("commit", task.task_id)),
    ).build([types.SimpleNamespace(task_id=t) for t in tasks]))
    return store, log.events("construction_wave")


def _admits(number):
    """A task step that looks at the store and admits a record saying how many it saw (each
    record has its own condition, so the count is part of what the index read recorded)."""
    async def step(view, order):
        seen = len(view.index().records)
        await asyncio.sleep(0)
        view.propose(helpers.make_record(
            source_task_id=f"t{number}", situation=f"task {number} saw {seen} records",
            condition=f"the request is about table t{number}",
            original=f"SELECT c{number} FROM t{number} WHERE a{number} > {seen}",
            improved=f"SELECT c{number} FROM t{number} WHERE a{number} >= {seen}"))
    return step


def _turns(until):
    """Turns of the event loop until ``until()`` holds, at most a bounded number (no clock)."""
    async def wait():
        for _ in range(1000):
            if until():
                return
            await asyncio.sleep(0)
    return wait()


def _content_of(store):
    return store.content_hash(), store.next_seq, store.evictions


def test_a_stale_run_still_going_is_re_run_after_the_commit_that_made_it_stale(tmp_path):
    """t1 reads the store before t0 commits its record, then waits: it is stale once t0
    commits, and is re-run then, on the committed store, without waiting for its stale run
    (which never finishes). The store is the sequential one."""
    async def t1(view, order):
        records = view.index().records
        if not records:  # stale: t0's record is missing; this run would never finish
            await asyncio.Event().wait()
        await _admits(1)(view, order)

    steps = {"t0": _admits(0), "t1": t1}
    order = []
    store, wave_events = _unit_build(tmp_path, 2, steps, list(steps), order)
    sequential, _ = _unit_build(tmp_path, 1, steps, list(steps), [])
    assert _content_of(store) == _content_of(sequential)
    assert order.count(("start", "t1")) == 2
    assert order.index(("commit", "t0")) < [i for i, e in enumerate(order)
                                            if e == ("start", "t1")][1]
    assert [w["reruns"] for w in wave_events] == [["t1"]]


def test_a_run_whose_reads_still_hold_commits_as_it_ran(tmp_path):
    """t0 observes a reuse of the old record; t1 admits a record without looking at the store:
    its one read (its admission) replays after t0's commit, so it commits as it ran."""
    old = helpers.make_record(source_task_id="t-old", situation="an earlier task's situation",
                              condition="")

    async def t0(view, order):
        view.observe_reuse(old.record_id, 1)

    async def t1(view, order):
        view.propose(helpers.make_record(source_task_id="t1", situation="t1's situation",
                                         condition=""))

    steps = {"t0": t0, "t1": t1}
    order = []
    store, wave_events = _unit_build(tmp_path, 2, steps, list(steps), order, [old])
    sequential, _ = _unit_build(tmp_path, 1, steps, list(steps), [], [old])
    assert _content_of(store) == _content_of(sequential)
    assert order.count(("start", "t1")) == 1 and wave_events[0]["reruns"] == []


@pytest.mark.parametrize("wave_size", [2, 6])
def test_a_chain_of_stale_runs_advances_and_builds_the_sequential_store(tmp_path, wave_size):
    """Every task reads what every earlier one admitted: every commit makes every run in flight
    stale. The queue still advances, each task is re-run at most once per earlier commit, and
    the store is the sequential one."""
    tasks = [f"t{i}" for i in range(6)]
    steps = {t: _admits(i) for i, t in enumerate(tasks)}
    order = []
    store, wave_events = _unit_build(tmp_path, wave_size, steps, tasks, order)
    sequential, _ = _unit_build(tmp_path, 1, steps, tasks, [])
    assert _content_of(store) == _content_of(sequential) and len(store.records) == len(tasks)
    assert [e[1] for e in order if e[0] == "commit"] == tasks
    launches = collections.Counter(t for kind, t in order if kind == "start")
    assert all(1 <= launches[t] <= i + 1 for i, t in enumerate(tasks))
    reruns = [t for w in wave_events for t in w["reruns"]]
    assert reruns and collections.Counter(reruns) == launches - collections.Counter(tasks)


def test_runs_beyond_the_window_are_checked_once_they_enter_it(tmp_path, monkeypatch):
    """The chain at W = 6 with a window of 2: after each commit only the run next to commit
    after the head is checked; t5 is first re-run once t3 has committed."""
    tasks = [f"t{i}" for i in range(6)]
    steps = {t: _admits(i) for i, t in enumerate(tasks)}
    monkeypatch.setattr(waves, "WINDOW", 2)
    order = []
    store, _ = _unit_build(tmp_path, 6, steps, tasks, order)
    sequential, _ = _unit_build(tmp_path, 1, steps, tasks, [])
    assert _content_of(store) == _content_of(sequential)
    t5_starts = [i for i, e in enumerate(order) if e == ("start", "t5")]
    assert t5_starts[1] > order.index(("commit", "t3"))


@pytest.mark.timeout(60)  # without the rule the build re-runs t1 forever: fail, not hang
def test_a_run_that_does_not_replay_on_the_store_it_ran_on_stops_the_build(tmp_path):
    """t1 records a reuse of a record the store does not hold as found: no run of it ever
    replays, so the build stops instead of re-running it again and again."""
    async def t1(view, order):
        view.reads.append(("reuse", ("no-such-record", 1), True))

    steps = {"t0": _admits(0), "t1": t1}
    with pytest.raises(RuntimeError, match="t1: retrieval or admission is not deterministic"):
        _unit_build(tmp_path, 2, steps, list(steps), [])


def test_a_committed_run_counts_each_parse_failure_once(tmp_path):
    from countermem_jax.method.prompting.failures import ParseFailureLog
    from countermem_jax.runtime.runlog import RunLog
    out = _view(store_lib.MemoryStore(helpers.paper("store")), "t")
    out.failures.count("GENERATE_LOCAL_ALTERNATIVES", "calls", 2)
    out.failures.add(template="GENERATE_LOCAL_ALTERNATIVES", decision="t#0", attempt=1,
                     error="no usable edit", reply="{}")
    phase = ParseFailureLog(tmp_path / "parse_failures.jsonl")
    out.commit(RunLog(tmp_path / "log.jsonl"), phase, TokenLedger())
    row = phase.summary()["GENERATE_LOCAL_ALTERNATIVES"]
    assert row["parse_failures"] == 1 and row["calls"] == 2 and len(phase.items) == 1
    lines = (tmp_path / "parse_failures.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == phase.items


def test_a_committed_run_books_its_charges_as_booking_each_call_in_the_phase_would(tmp_path):
    """The phase's ledger after a run commits is the ledger that booked the run's calls itself,
    one by one: the same totals per phase, decision and purpose, in the same order."""
    earlier = (Charge("construction", "t0#0", "DRAFT_ACTION"), Usage(4, 1))
    calls = [(Charge("construction", "t1#0", "DRAFT_ACTION"), Usage(10, 5, 2)),
             (Charge("construction", "t1#1", "CONDITION_JUDGE"), Usage(7, 1, source="tokenizer"),
              True, True),
             (Charge("construction", "t1#0", "REVISE_WITH_RECORD"), Usage(3, 2, cached_tokens=2)),
             (Charge("construction"), Usage(1, 1), True)]
    direct, phase = TokenLedger(), TokenLedger()
    out = _view(store_lib.MemoryStore(helpers.paper("store")), "t")
    direct.record(*earlier)
    phase.record(*earlier)
    for call in calls:
        direct.record(*call)
        out.ledger.record(*call)
    out.commit(RunLog(tmp_path / "log.jsonl"), ParseFailureLog(), phase)
    for name in ("by_phase", "by_decision", "by_purpose", "calls", "malformed"):
        assert list(getattr(phase, name).items()) == list(getattr(direct, name).items()), name
    assert phase.summary() == direct.summary() and phase.total().source == "mixed"
