"""Construction in waves (issue 14): W tasks in flight, the store byte-identical to W = 1.

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

from countermem_jax import construction_waves as waves
from countermem_jax import counterfactual, experiment, metrics
from countermem_jax.testing.scripted_backbone import Rule, ScriptedBackbone
from countermem_jax.config_defaults import base_config
from countermem_jax.backbones.base import Charge, TokenLedger, Usage
from countermem_jax.memory import load_frozen, load_store
from countermem_jax.memory import store as store_lib
from countermem_jax.retrieval import conditions as cond_lib
from countermem_jax.retrieval.retrieve import RetrievalIndex
from countermem_jax.runlog import RunLog

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
    """The deterministic backbone; ``crash_after``: every call after that many calls made by
    task runs raises (the condition judge's calls made ahead for runs to come, charged to no
    decision, are not counted: how many there are depends on when the runs finish)."""
    fake = ScriptedBackbone()
    if crash_after is not None:
        count = {"calls": 0}

        def crash(messages):
            raise Killed(f"killed after {crash_after} calls")

        def counting(charge, messages):
            count["calls"] += bool(charge.decision)
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
    c = base_config()
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


# Hashes of the files the sequential build wrote before construction in waves existed (main at
# c6b3308, this scenario, pinned snapshot id and clock).
SEQUENTIAL_STORE_SHA256 = "437012ce9aa9cd99dead3c07e698b73e791cbc8da2c648b3ad2055dc45d1564f"
SEQUENTIAL_FROZEN_SHA256 = "5c4e6ef1f84c78c9a4882f71bbd6dbc19ad147e7b085736c368ae71432a5cc77"


def test_one_task_in_flight_is_the_sequential_build(tmp_path, people, pinned):
    wd = _build(tmp_path, people, "w1", wave_size=1)
    assert _sha(wd / "store.jsonl") == SEQUENTIAL_STORE_SHA256
    assert _sha(wd / "store_frozen.jsonl") == SEQUENTIAL_FROZEN_SHA256
    waves = _waves(wd)
    assert [w["tasks"] for w in waves] == [[t] for t in MANIFEST["build"]]
    assert all(w["reruns"] == [] and w["discarded_llm_calls"] == 0 for w in waves)
    assert all(w["prejudged_llm_calls"] == 0 for w in waves)  # every run asks for itself


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
    # neither discarded runs' calls nor the judge's calls made ahead are booked
    assert ends[many]["tokens"] == ends[one]["tokens"]
    assert ends[many]["waves"]["reruns"] == len(reruns)
    # stale runs were relaunched as soon as an earlier commit made them stale, most of them
    # long before their task was next to commit
    assert len([t for w in waves for t in w["reruns_at_head"]]) < len(reruns)


def test_with_a_response_cache_the_judge_is_asked_ahead_and_changes_nothing(tmp_path, people,
                                                                           pinned):
    """On a backbone that answers repeated requests (a response cache, through which the
    condition judge's calls made ahead pay off: ``test_condition_judge``), a build at 64 makes
    them for later tasks; its store, log and cost of building are the sequential build's, and
    the calls made ahead are counted in the wave log, never booked. Without one none is made
    (the run would make the call again)."""
    one = _build(tmp_path, people, "w1", wave_size=1)
    backbone = scripted()
    backbone.answers_repeats = True  # the scripted model answers a repeat as it did the first
    ahead = _build(tmp_path, people, "w64", wave_size=64, backbone=backbone)
    assert any(c.purpose == "CONDITION_JUDGE" and not c.decision for c, _ in backbone.calls)
    for name in ("store.jsonl", "store_frozen.jsonl", "store_frozen.sha256"):
        assert (ahead / name).read_bytes() == (one / name).read_bytes(), name
    assert _construction_events(ahead) == _construction_events(one)
    ends = {wd: RunLog(wd / "log.jsonl").events("phase_end")[-1] for wd in (one, ahead)}
    assert ends[ahead]["tokens"] == ends[one]["tokens"]
    assert ends[ahead]["waves"]["prejudged_llm_calls"] == \
        sum(w["prejudged_llm_calls"] for w in _waves(ahead)) > 0
    uncached = _build(tmp_path, people, "w64-uncached", wave_size=64)
    assert ends[one]["waves"]["prejudged_llm_calls"] == 0
    assert RunLog(uncached / "log.jsonl").events("phase_end")[-1]["waves"][
        "prejudged_llm_calls"] == 0


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


def test_wave_size_below_one_is_refused(tmp_path, people):
    with pytest.raises(Exception, match=r"construction\.wave_size=0 must be >= 1"):
        experiment.build_memory(_config(tmp_path, 0), tmp_path / "wd", backbone=scripted(),
                                benchmark=people)
    assert not (tmp_path / "wd" / "store.jsonl").exists()


# ----------------------------------------------------------------------------- the replay rule
def _view(store, task_id):
    checker = cond_lib.CompositeChecker()
    return waves.TaskView(store, task_id, lambda records, c: RetrievalIndex(records, checker=c),
                          checker)


def test_a_read_the_sequential_order_would_have_answered_otherwise_is_stale(record_factory):
    """B looked at the store before A's record was committed: B is re-run. D only observed a
    reuse of a record A did not touch: D commits as it ran, after A, as in the sequential run."""
    old = record_factory(source_task_id="t0")
    empty, start = store_lib.MemoryStore(), store_lib.MemoryStore(records=[old])
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
    assert waves.replay(store_lib.MemoryStore(), e) is None


# ------------------------------------------------------- stale runs relaunched before the head
def _unit_build(tmp_path, wave_size, steps, tasks, order, initial=(), prejudge=None):
    """``build_in_waves`` from a store of the records ``initial`` over ``tasks`` (ids) with the
    scripted step ``steps[id](view, order)`` as each task's run (and ``prejudge``, if given);
    ``order`` gets ("start", id) per launch and ("commit", id) per commit. Returns the final
    store and the wave events."""
    def run_task(task, view, events):
        order.append(("start", task.task_id))
        return steps[task.task_id](view, order)

    log = RunLog(tmp_path / f"log-{wave_size}.jsonl")
    store, _ = asyncio.run(waves.build_in_waves(
        store_lib.MemoryStore(records=initial), [types.SimpleNamespace(task_id=t) for t in tasks],
        run_task, wave_size=wave_size,
        make_index=lambda records, c: RetrievalIndex(records, checker=c),
        make_checker=cond_lib.CompositeChecker, log=log,
        commit=lambda committed, task, ctx: order.append(("commit", task.task_id)),
        prejudge=prejudge))
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


def _llm_call(cached: bool):
    """What a backbone call books, as the run's own (held) charge."""
    TokenLedger().record(Charge("construction", purpose="DRAFT_ACTION"), Usage(10, 5),
                         cached=cached)


OLD = helpers.make_record(source_task_id="t-old", situation="an earlier task's situation",
                          condition="")


async def _uses_the_old_record(view, order):
    """A reuse observation: the committed store's records stay, one reuse statistic changes."""
    view.observe_reuse(OLD.record_id, 1)


async def _retrieves(view, order):
    """Reads the store as a decision does: what the condition judge is shown, a retrieval."""
    view.index().retrieve(cond_lib.TaskContext(view.task_id, "an earlier task's situation"))


async def _then_waits_for_t1(view, order):
    await _turns(lambda: ("commit", "t1") in order)


async def _then_a_call_the_cache_did_not_answer(view, order):
    _llm_call(cached=False)


async def _then_a_cached_call(view, order):
    _llm_call(cached=True)


@pytest.mark.parametrize("t1, t3_first_run, at_once", [
    (_admits(1), _then_waits_for_t1, True),
    (_uses_the_old_record, _then_waits_for_t1, True),
    (_admits(1), _then_a_call_the_cache_did_not_answer, True),
    (_uses_the_old_record, _then_a_call_the_cache_did_not_answer, True),
    (_admits(1), _then_a_cached_call, True),
    (_uses_the_old_record, _then_a_cached_call, False),
], ids=["admits/still running", "reuse/still running", "admits/finished, uncached call",
        "reuse/finished, uncached call", "admits/finished, cached call",
        "reuse/finished, cached call"])
def test_a_stale_run_is_relaunched_as_soon_as_it_is_stale(tmp_path, monkeypatch, t1,
                                                         t3_first_run, at_once):
    """From a store with one record: t0 looks and changes nothing (nothing is checked after
    its commit), t1 admits a record or observes a reuse of the old one, t2 is slow and reads
    nothing, and t3's first run retrieves before t1's commit, so it is stale, and goes on with
    ``t3_first_run`` (its relaunch, which sees t1's change, admits a record instead). t2
    finishes only once it has seen t3 launched again (or after a bounded number of turns of the
    loop). t3 is relaunched as soon as t1 commits, while t2 is still running, unless its stale
    run has finished on cached replies only and t1 changed only a reuse statistic: then it is
    relaunched when next to commit. The store is the sequential build's either way."""
    replayed = []
    replay = waves.replay
    monkeypatch.setattr(waves, "replay",
                        lambda store, view: replayed.append(view.task_id) or replay(store, view))

    async def slow(view, order):
        await _turns(lambda: order.count(("start", "t3")) > 1)
        order.append(("end", "t2"))

    async def t3(view, order):
        await _retrieves(view, order)
        if view.store.records == (OLD,):  # before t1's commit (what it retrieved says so)
            return await t3_first_run(view, order)
        await _admits(3)(view, order)

    steps = {"t0": _retrieves, "t1": t1, "t2": slow, "t3": t3}
    order = []
    store, wave_events = _unit_build(tmp_path, 4, steps, list(steps), order, [OLD])
    replayed_in_waves = list(replayed)
    sequential, _ = _unit_build(tmp_path, 1, steps, list(steps), [], [OLD])
    assert _content_of(store) == _content_of(sequential)
    assert store.records[-1].source_task_id == "t3"
    assert [e for e in order if e[0] == "commit"] == [("commit", t) for t in steps]
    relaunch = [i for i, e in enumerate(order) if e == ("start", "t3")][1]
    if at_once:
        assert order.index(("commit", "t1")) < relaunch < order.index(("end", "t2"))
    else:
        assert order.index(("commit", "t2")) < relaunch
    assert [(w["reruns"], w["reruns_at_head"]) for w in wave_events] == \
        [(["t3"], [] if at_once else ["t3"])]
    assert wave_events[0]["discarded_llm_calls"] == (t3_first_run is not _then_waits_for_t1)
    # checked once, once t1 had finished (t0 changed nothing), and not again on the way to the
    # head; its relaunch is replayed once, to commit; t2 reads nothing, so it is never replayed
    assert replayed_in_waves.count("t3") == 2 and replayed_in_waves.count("t2") == 0


def test_a_stale_run_still_going_is_not_waited_for(tmp_path):
    """t2 reads the store after t0's commit (on its view of the store before it, so stale)
    while t1 is next to commit; t1 changes nothing. When t1 finishes, t2 is checked again (it
    has read more since the last check) and relaunched at once: its stale run, which would have
    gone on for a long while, never finishes."""
    async def t1(view, order):
        await _turns(lambda: ("read", "t2") in order)

    async def t2(view, order):
        await _turns(lambda: ("commit", "t0") in order)
        records = view.index().records
        order.append(("read", "t2"))
        if not records:  # stale: t0's record is missing
            await _turns(lambda: False)
            order.append(("end", "stale t2"))

    steps = {"t0": _admits(0), "t1": t1, "t2": t2}
    order = []
    store, wave_events = _unit_build(tmp_path, 3, steps, list(steps), order)
    sequential, _ = _unit_build(tmp_path, 1, steps, list(steps), [])
    assert _content_of(store) == _content_of(sequential)
    assert ("end", "stale t2") not in order
    assert order.count(("start", "t2")) == 2
    assert [(w["reruns"], w["reruns_at_head"]) for w in wave_events] == [(["t2"], [])]


def test_a_run_is_relaunched_on_the_changes_of_a_finished_run_not_yet_committed(tmp_path):
    """t0 is slow and changes nothing; t1 admits a record and finishes long before t0; t2 reads
    the store. As soon as t1 has finished, t2 is relaunched against the committed store with
    t1's change applied (its guess), while t0 is still running: the relaunch sees t1's record
    before t1 commits, and since that guess comes true (t0 changes nothing) it is not relaunched
    again when t0 and t1 commit. The store is the sequential one."""
    async def t0(view, order):
        await _turns(lambda: order.count(("start", "t2")) > 1)
        order.append(("end", "t0"))

    async def t2(view, order):
        order.append(("t2 saw", len(view.index().records)))
        await _admits(2)(view, order)

    steps = {"t0": t0, "t1": _admits(1), "t2": t2}
    order = []
    store, wave_events = _unit_build(tmp_path, 3, steps, list(steps), order)
    sequential, _ = _unit_build(tmp_path, 1, steps, list(steps), [])
    assert _content_of(store) == _content_of(sequential)
    relaunch = [i for i, e in enumerate(order) if e == ("start", "t2")][1]
    assert relaunch < order.index(("end", "t0")) < order.index(("commit", "t0"))
    assert order[relaunch + 1] == ("t2 saw", 1)  # t1's record, not yet committed
    assert order.count(("start", "t2")) == 2 and order.count(("start", "t1")) == 1
    assert [(w["reruns"], w["reruns_at_head"]) for w in wave_events] == [(["t2"], [])]


def test_conditions_admitted_ahead_are_judged_for_the_later_tasks_only(tmp_path, monkeypatch):
    """Only the run next to commit is checked (no run is relaunched on a guess). t0 is slow
    and changes nothing; t1, t2 and t3 each admit a record with a condition of its own. While
    t0 is still running, the judge's calls for t1's condition are made for t2 and t3, and those
    for t2's for t3: for the later tasks only (never a task's own condition, nor an earlier
    task's), once per task, whether or not the record is committed yet. The calls are counted
    in the wave log; the store is the sequential one."""
    monkeypatch.setattr(waves, "EAGER_WINDOW", 1)

    def prejudge_into(order):
        async def prejudge(task, conditions):
            for condition in conditions:
                order.append(("prejudge", task.task_id, condition))
                _llm_call(cached=False)
        return prejudge

    async def t0(view, order):
        await _turns(lambda: ("prejudge", "t3", "the request is about table t2") in order)
        order.append(("end", "t0"))

    steps = {"t0": t0, "t1": _admits(1), "t2": _admits(2), "t3": _admits(3)}
    order, one_at_a_time = [], []
    store, wave_events = _unit_build(tmp_path, 4, steps, list(steps), order,
                                     prejudge=prejudge_into(order))
    sequential, _ = _unit_build(tmp_path, 1, steps, list(steps), one_at_a_time,
                                prejudge=prejudge_into(one_at_a_time))
    assert _content_of(store) == _content_of(sequential)
    asked = [(task, condition[-2:]) for kind, task, *condition in order if kind == "prejudge"
             for condition in condition]
    assert sorted(asked) == [("t2", "t1"), ("t3", "t1"), ("t3", "t2")]
    assert order.index(("prejudge", "t2", "the request is about table t1")) < \
        order.index(("end", "t0")) < order.index(("commit", "t1"))
    assert sum(w["prejudged_llm_calls"] for w in wave_events) == 3
    # one task in flight: every run is launched on the committed store, nothing is asked ahead
    assert [e for e in one_at_a_time if e[0] == "prejudge"] == []


def _content_of(store):
    return store.content_hash(), store.next_seq, store.evictions


@pytest.mark.parametrize("wave_size", [2, 6])
def test_a_chain_of_stale_runs_advances_and_builds_the_sequential_store(tmp_path, wave_size):
    """Every task reads what every earlier one admitted: every commit makes every run in flight
    stale. The queue still advances, each task is relaunched at most once per earlier commit,
    and the store is the sequential one."""
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
    assert collections.Counter(reruns) == launches - collections.Counter(tasks)
    assert sum(len(w["reruns_at_head"]) for w in wave_events) <= len(tasks) - 1


def test_runs_beyond_the_eager_window_are_checked_once_they_enter_it(tmp_path, monkeypatch):
    """The chain at W = 6 with a window of 2: after each commit only the two runs next to
    commit are checked and relaunched; t5, fourth in line after t0's commit, is first
    relaunched once t3 has committed (it is then within two of the head), so the chain takes
    fewer discarded runs than with every run in the window, and builds the same store."""
    tasks = [f"t{i}" for i in range(6)]
    steps = {t: _admits(i) for i, t in enumerate(tasks)}
    everywhere, windowed = [], []
    wide, _ = _unit_build(tmp_path, 6, steps, tasks, everywhere)
    monkeypatch.setattr(waves, "EAGER_WINDOW", 2)
    narrow, _ = _unit_build(tmp_path, 6, steps, tasks, windowed)
    sequential, _ = _unit_build(tmp_path, 1, steps, tasks, [])
    assert _content_of(narrow) == _content_of(wide) == _content_of(sequential)
    t5_starts = [i for i, e in enumerate(windowed) if e == ("start", "t5")]
    assert t5_starts[1] > windowed.index(("commit", "t3"))
    assert sum(e[0] == "start" for e in windowed) < sum(e[0] == "start" for e in everywhere)


def test_a_runs_requests_queue_with_its_split_position_as_priority(tmp_path):
    """The client's limit serves the task next to commit first: each run (relaunches
    included) makes its calls with its position in the split as request priority."""
    from countermem_jax.backbones.base import REQUEST_PRIORITY
    seen = {}

    def step(name):
        async def run(view, order):
            seen.setdefault(name, set()).add(REQUEST_PRIORITY.get())
            await _admits(int(name[1:]))(view, order)
        return run
    tasks = [f"t{i}" for i in range(4)]
    _unit_build(tmp_path, 4, {t: step(t) for t in tasks}, tasks, [])
    assert seen == {f"t{i}": {i} for i in range(4)}
    assert REQUEST_PRIORITY.get() == 0  # the caller's context is untouched
