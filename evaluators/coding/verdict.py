"""Reads the repository-test verdict the harness plugin sent over the sandbox's channel
(``harness/countermem_harness.py``) and refuses anything that is not one complete, authentic run.
"""
import dataclasses
import hashlib
import hmac
import json

HARNESS_VERSION = "3"   # part of the checker's version and of the QuixBugs split cache key


@dataclasses.dataclass
class Verdict:
    started: bool = False
    finished: bool = False
    exitstatus: int | None = None
    outcomes: dict = dataclasses.field(default_factory=dict)   # node id -> passed?
    skipped: set = dataclasses.field(default_factory=set)      # node ids skipped (not passed)
    collected: list = dataclasses.field(default_factory=list)
    missing: list = dataclasses.field(default_factory=list)     # expected ids not collected
    collect_errors: list = dataclasses.field(default_factory=list)  # (node id, error text)
    problems: list = dataclasses.field(default_factory=list)


def parse(data: bytes, key: bytes) -> Verdict:
    """Verifies and decodes the channel's bytes; ``problems`` lists everything wrong."""
    verdict, mac = Verdict(), b""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        verdict.problems.append("the verdict channel ends with a partial record")
        lines.pop()
    for number, line in enumerate(lines):
        head, _, body = line.partition(b" ")
        mac = hmac.new(key, mac + body, hashlib.sha256).digest()
        try:
            authentic = hmac.compare_digest(bytes.fromhex(head.decode("ascii")), mac)
            record = json.loads(body) if authentic else None
        except (ValueError, UnicodeDecodeError):
            authentic, record = False, None
        if not authentic or not isinstance(record, dict) or record.get("seq") != number:
            verdict.problems.append(f"record {number} on the verdict channel was not written by "
                                    "the harness (forged or out of order)")
            return verdict
        if verdict.finished:
            verdict.problems.append("records after the end of the test session")
            return verdict
        _apply(verdict, record)
    if not verdict.started:
        return verdict
    if not verdict.finished:
        verdict.problems.append("pytest did not finish its session (it exited, was killed or was "
                                "replaced before reporting)")
    return verdict


def _apply(verdict: Verdict, record: dict) -> None:
    kind = record.get("kind")
    if kind == "start" and not verdict.started:
        verdict.started = True
    elif not verdict.started:
        verdict.problems.append(f"{kind!r} record before the session started")
    elif kind == "collect_error":
        verdict.collect_errors.append((str(record.get("nodeid")), str(record.get("error"))))
    elif kind == "collected":
        verdict.collected = list(record.get("ids", []))
        verdict.missing = list(record.get("missing", []))
    elif kind == "test":
        nodeid = record.get("nodeid")
        if nodeid in verdict.outcomes or nodeid not in verdict.collected:
            verdict.problems.append(f"a second or uncollected result for {nodeid}")
        verdict.outcomes[nodeid] = record.get("passed") is True
        if record.get("skipped") is True:
            verdict.skipped.add(nodeid)
    elif kind == "finish":
        verdict.finished = True
        verdict.exitstatus = record.get("exitstatus")
        verdict.problems += [f"pytest was tampered with: {t}" for t in record.get("tampered", [])]
        if record.get("calls", 0) > len(verdict.outcomes):
            verdict.problems.append("more test calls than reported results")
    else:
        verdict.problems.append(f"unexpected record {kind!r}")


def coverage_problems(verdict: Verdict, expected: set[str]) -> list[str]:
    """The verdict must hold exactly one result for each expected test id."""
    got = set(verdict.outcomes)
    problems = []
    if got != expected:
        missing, extra = sorted(expected - got), sorted(got - expected)
        if missing:
            problems.append(f"no result for {len(missing)} of the {len(expected)} task tests "
                            f"(e.g. {missing[0]})")
        if extra:
            problems.append(f"results for {len(extra)} tests outside the task (e.g. {extra[0]})")
    return problems
