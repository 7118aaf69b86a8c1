"""Applicability-condition checks: is record condition c compatible with the current task?

Checkers are pluggable. Each returns True (holds), False (fails) or None (cannot judge this
condition); ``CompositeChecker`` asks them in order and applies a policy to conditions nobody
could judge. The empty condition is universal and never reaches a checker.

``RuleChecker`` decides conditions written in the rule grammar (``grammar.py``: features,
environment, feedback kind, and the clauses derived from a verified edit); a condition with a
clause outside it is left to the next checker.

Free-text conditions go to ``LLMJudgeChecker``, whose backbone calls are asynchronous and made by
the decision that needs them (``CompositeChecker.judge_pending`` before retrieval, with the
decision's own ``ask``), so judging never blocks the event loop and its tokens are charged to that
decision. A verdict the judge's reply does not state is *undecided*; ``CompositeChecker`` applies
the ``unknown`` policy to it (``memory.unknown_condition``, default "exclude": a record whose
applicability cannot be established is not offered).
"""
import asyncio
import collections
import dataclasses
import re
from typing import Any, Awaitable, Callable, Protocol, Sequence

from countermem_jax.backbones.base import OutputConstraint
from countermem_jax.backbones.replies import json_object
from countermem_jax.method.conditions.applicability import FALLBACK_POLICIES, TaskFacts, check
from countermem_jax.method.conditions.grammar import parse


class ConditionChecker(Protocol):
    """Anything that can rule on a condition c for a task (the eligibility test of Eq. 7)."""

    def check(self, condition: str, task: TaskFacts) -> bool | None:
        """True if ``condition`` holds for ``task``, False if it fails, None if it cannot tell."""


class RuleChecker:
    """Checks conditions written in the rule grammar (``conditions.check``) against the task.

    ``fallback`` decides conditions derived from a verified edit (records without a condition of
    their own): "derive" checks their ``edit touches`` and ``draft`` clauses against the request
    and the decision's draft, "exclude" keeps such records out of retrieval.
    """

    def __init__(self, fallback: str = "derive"):
        if fallback not in FALLBACK_POLICIES:
            raise ValueError(f"fallback-condition policy must be one of "
                             f"{FALLBACK_POLICIES}, got {fallback!r}")
        self.fallback = fallback

    def check(self, condition: str, task: TaskFacts) -> bool | None:
        """Conjunction of the condition's clauses; None as soon as one clause is outside the grammar.

        A condition the rules only half understand is undecided rather than judged on its known
        half, so that it can go on to the LLM judge or the ``unknown`` policy. The empty
        condition is ``CompositeChecker``'s to answer: asked here, the rules cannot tell.
        """
        if not condition.strip():
            return None
        return check(parse(condition), task, self.fallback)


@dataclasses.dataclass(frozen=True)
class JudgeSettings:
    """The judge's own sampling (``memory.judge``): a reasoning model needs room to think before
    it answers (gpt-oss at ``reasoning_effort=medium`` spends 8 tokens thinking and says
    nothing), so the judge asks for ``max_tokens`` with ``reasoning_effort`` (sent only to
    servers that take it; empty = the backbone's own)."""
    max_tokens: int
    reasoning_effort: str
    temperature: float


# The decision's own LLM call, so the judge's tokens are charged to that decision (§4.4).
Ask = Callable[[str], Awaitable[Any]]   # prompt -> a str, or a reply with .text / .reasoning


# The judge's output constraint (§3.4): a verdict, nothing else (its tokens are charged to a
# decision).
JUDGE_CONSTRAINT = OutputConstraint.from_schema("condition_verdict", {
    "type": "object", "properties": {"verdict": {"enum": ["YES", "NO"]}}, "required": ["verdict"],
    "additionalProperties": False})


def verdict_of(reply: str) -> bool | None:
    """The condition judge's verdict in a JSON reply ({"verdict": "YES" | "NO"}), or None."""
    obj = json_object(reply)
    value = str(obj.get("verdict", "")).upper() if obj else ""
    return {"YES": True, "NO": False}.get(value)


class LLMJudgeChecker:
    """Free-text conditions judged by the backbone.

    ``judge(condition, task, ask)`` makes the call (``ask`` is the deciding decision's own,
    charged to it) and caches the verdict per (condition, task id, run scope); ``check`` only
    reads that cache, so a frozen store is judged once per task run and retrieval stays
    synchronous. Asking ``check`` about a condition that was never judged is an error, not a
    silent "include".
    """

    # Laid out for a server's prefix cache: the fixed instruction, then the task (shared by the
    # task's other judge calls), the condition last (docs/speed.md, prefix share).
    PROMPT = ("You decide whether a stored correction applies to a new task. Answer with one JSON "
              'object: {{"verdict": "YES"}} if the condition below holds for the task, else '
              '{{"verdict": "NO"}}.\n<task>\n{task}\n</task>\n<condition>\n{condition}\n'
              "</condition>\n")

    def __init__(self, settings: JudgeSettings, max_task_chars: int = 3000):
        self.settings = settings
        self._max = max_task_chars
        self._cache: dict[tuple[str, str, str], bool | None] = {}

    async def judge(self, condition: str, task: TaskFacts, ask: Ask) -> bool | None:
        """Verdict for (condition, task), asking the backbone through ``ask`` at most once per run scope.

        Accepts a plain string reply or a reply object with ``.text`` and optional ``.reasoning``
        (a reasoning model may put its answer only in the latter; ``parse_verdict`` handles both).
        The reply's constraint (``JUDGE_CONSTRAINT``) asks for {"verdict": "YES" | "NO"}; a reply
        that breaks it (counted by ``prompts.checked_chat``) is read by ``parse_verdict``, and
        one that states no verdict is undecided: the judge has no repair round.
        """
        key = (condition, task.task_id, task.scope)
        if key not in self._cache:
            reply = await ask(self.PROMPT.format(condition=condition, task=task.text[: self._max]))
            text, reasoning = (reply, "") if isinstance(reply, str) else (
                reply.text, getattr(reply, "reasoning", ""))
            verdict = verdict_of(text)
            self._cache[key] = verdict if verdict is not None else parse_verdict(text, reasoning)
        return self._cache[key]

    def check(self, condition: str, task: TaskFacts) -> bool | None:
        """The cached verdict; ``RuntimeError`` if this condition was never judged."""
        key = (condition, task.task_id, task.scope)
        if key not in self._cache:
            raise RuntimeError(f"condition {condition[:60]!r} was not judged for task "
                               f"{task.task_id!r}; call CompositeChecker.judge_pending first")
        return self._cache[key]


_MARKUP = re.compile(r"[*_`#>\[\]()\"'“”]")
_ANSWER = re.compile(r"\b(?:final\s+)?(?:answer|verdict|response)\s*(?:is|:|=|-)?\s*(yes|no)\b"
                     r"|\b(?:answer|respond|reply|say|output)(?:\s+with)?\s+(yes|no)\b",
                     re.IGNORECASE)
_LEADING = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_WORDS = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def _verdict_in(text: str, reasoning: bool) -> bool | None:
    """YES/NO stated in one text; ``reasoning`` selects the stricter rules for thinking traces.

    In an answer, a leading YES/NO or a single word used throughout decides; in a reasoning
    trace only an explicit "answer is …" or a bare final line counts.
    """
    plain = _MARKUP.sub(" ", text).strip()
    if not plain:
        return None
    if not reasoning and (m := _LEADING.match(plain)):
        return m.group(1).lower() == "yes"
    stated = [next(g for g in m.groups() if g) for m in _ANSWER.finditer(plain)]
    if stated:
        return stated[-1].lower() == "yes"
    if reasoning:   # thinking mentions YES and NO as options; only a stated answer counts
        last_line = plain.splitlines()[-1].strip()
        m = re.fullmatch(r"\W*(yes|no)\W*", last_line, re.IGNORECASE)
        return None if m is None else m.group(1).lower() == "yes"
    words = {w.lower() for w in _WORDS.findall(plain)}
    return (words == {"yes"}) if len(words) == 1 else None


def parse_verdict(content: str, reasoning: str = "") -> bool | None:
    """YES/NO from a judge reply; None (undecided) when it states neither or both.

    The content decides first ("YES", "**No**", "Answer: no", "The answer is YES."); when it is
    empty or says nothing, the reasoning field counts only for an explicitly stated answer
    ("so the answer is NO", or a last line that is just YES/NO), never for the word appearing
    while the model weighs its options.
    """
    verdict = _verdict_in(content or "", reasoning=False)
    if verdict is None and reasoning:
        verdict = _verdict_in(reasoning, reasoning=True)
    return verdict


def parse_yes_no(reply: str) -> bool | None:
    """The verdict stated in a plain reply (see ``parse_verdict``)."""
    return parse_verdict(reply)


@dataclasses.dataclass(frozen=True)
class VerdictCounts:
    """What one decision's condition checks found, over the distinct non-empty conditions of
    the records it could retrieve (logged per decision as ``memory.conditions``)."""
    compatible: int = 0
    incompatible: int = 0
    undecided: int = 0
    judged_by_llm: int = 0

    def to_json(self) -> dict:
        """The four counts as a dict (the ``memory.conditions`` log entry)."""
        return dataclasses.asdict(self)


class CompositeChecker:
    """Asks each checker in turn; ``unknown`` ("include" or "exclude") decides conditions no
    checker could decide, an undecided LLM verdict included."""

    def __init__(self, checkers: Sequence[ConditionChecker] = (), unknown: str = "exclude"):
        if unknown not in ("include", "exclude"):
            raise ValueError(f"unknown-condition policy must be 'include' or 'exclude', "
                             f"got {unknown!r}")
        self._checkers = list(checkers) or [RuleChecker()]
        self._unknown = unknown

    @property
    def judge(self) -> LLMJudgeChecker | None:
        """The LLM judge among the checkers, or None when conditions are judged by rules only."""
        return next((c for c in self._checkers if isinstance(c, LLMJudgeChecker)), None)

    def verdict(self, condition: str, task: TaskFacts) -> bool | None:
        """True / False, or None when no checker could decide."""
        if not condition.strip():
            return True
        for checker in self._checkers:
            verdict = checker.check(condition, task)
            if verdict is not None:
                return verdict
        return None

    def compatible(self, condition: str, task: TaskFacts) -> bool:
        """The eligibility test of Eq. 7 for one condition: the verdict, or the ``unknown`` policy.

        With the default "exclude", a record whose condition nobody could decide is not offered.
        """
        verdict = self.verdict(condition, task)
        return (self._unknown == "include") if verdict is None else verdict

    async def judge_pending(self, conditions: Sequence[str], task: TaskFacts,
                            ask: Ask) -> VerdictCounts:
        """Has the LLM judge decide, with ``ask``, the conditions the checkers before it cannot;
        returns the verdict counts over ``conditions`` (distinct, non-empty) for this task.

        The judge's calls for the distinct conditions are in flight together, started
        in condition order; their verdicts are taken in condition order, so the counts and the
        verdicts the judge caches are those of judging one condition after another. What ``ask`` charges
        (the decision's ledger entry, task-run tokens and calls) is a sum, the same whatever
        order the replies come back in. If a call fails, the first failure in condition order
        is raised once every call has finished (the others are charged, as they were made).
        """
        judge = self.judge
        split = self._checkers.index(judge) if judge is not None else len(self._checkers)
        before, after = self._checkers[:split], self._checkers[split + 1:]
        distinct = list(dict.fromkeys(c.strip() for c in conditions if c.strip()))
        verdicts = [_first_verdict(before, c, task) for c in distinct]
        asked = [i for i, v in enumerate(verdicts) if v is None] if judge is not None else []
        replies = await asyncio.gather(*(judge.judge(distinct[i], task, ask) for i in asked),
                                       return_exceptions=True) if asked else []
        for i, reply in zip(asked, replies):
            if isinstance(reply, BaseException):
                raise reply
            verdicts[i] = reply if reply is not None else _first_verdict(after, distinct[i], task)
        counts = collections.Counter(
            {True: "compatible", False: "incompatible", None: "undecided"}[v] for v in verdicts)
        return VerdictCounts(counts["compatible"], counts["incompatible"], counts["undecided"],
                             len(asked))


def _first_verdict(checkers: Sequence[ConditionChecker], condition: str,
                   task: TaskFacts) -> bool | None:
    """The first verdict of ``checkers`` asked in turn, or None when none could decide."""
    for checker in checkers:
        verdict = checker.check(condition, task)
        if verdict is not None:
            return verdict
    return None
