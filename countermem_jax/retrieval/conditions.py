"""Applicability-condition checks: is record condition c compatible with the current task?

Checkers are pluggable. Each returns True (holds), False (fails) or None (cannot judge this
condition); ``CompositeChecker`` asks them in order and applies a policy to conditions nobody
could judge. The empty condition is universal and never reaches a checker.

Rule grammar (``RuleChecker``), case-insensitive, clauses joined by ``AND``:
  feature == value      feature != value      feature in [v1, v2, ...]
  has feature           not feature           text contains "phrase"
Features come from the task (each domain computes its own, e.g. SQL's ``bound`` = inclusive/strict
from the question's wording); values compare as lower-case strings.
"""
import dataclasses
import re
from typing import Any, Callable, Mapping, Protocol, Sequence


@dataclasses.dataclass(frozen=True)
class TaskContext:
    """What a condition may look at: the task's id, its visible text, and its features."""
    task_id: str
    text: str
    features: Mapping[str, Any] = dataclasses.field(default_factory=dict)


class ConditionChecker(Protocol):
    def check(self, condition: str, task: TaskContext) -> bool | None: ...


_CLAUSE_SPLIT = re.compile(r"\s+(?:and|&&)\s+", re.IGNORECASE)
_CMP = re.compile(r"^([A-Za-z_][\w.]*)\s*(==|!=|=)\s*(.+)$")
_IN = re.compile(r"^([A-Za-z_][\w.]*)\s+in\s+\[(.*)\]$", re.IGNORECASE)
_HAS = re.compile(r"^(has|not)\s+([A-Za-z_][\w.]*)$", re.IGNORECASE)
_CONTAINS = re.compile(r"^(?:text|question|prompt)\s+contains\s+(['\"])(.+)\1$", re.IGNORECASE)


def _norm(value: Any) -> str:
    return str(value).strip().strip("'\"").strip().lower()


class RuleChecker:
    """Checks conditions written in the rule grammar above against task features."""

    def check(self, condition: str, task: TaskContext) -> bool | None:
        results = [self._clause(c.strip(), task) for c in _CLAUSE_SPLIT.split(condition.strip())]
        if any(r is None for r in results):
            return None
        return all(results)

    @staticmethod
    def _clause(clause: str, task: TaskContext) -> bool | None:
        features = {k.lower(): v for k, v in task.features.items()}
        if m := _CONTAINS.match(clause):
            return m.group(2).lower() in task.text.lower()
        if m := _IN.match(clause):
            name = m.group(1).lower()
            options = {_norm(v) for v in m.group(2).split(",") if v.strip()}
            return name in features and _norm(features[name]) in options
        if m := _HAS.match(clause):
            value = features.get(m.group(2).lower())
            present = value not in (None, False, "", 0)
            return present if m.group(1).lower() == "has" else not present
        if m := _CMP.match(clause):
            name, op, value = m.group(1).lower(), m.group(2), _norm(m.group(3))
            if name not in features:
                return False if op != "!=" else True
            equal = _norm(features[name]) == value
            return equal if op in ("==", "=") else not equal
        return None


class LLMJudgeChecker:
    """Free-text conditions judged by the backbone (injected as ``ask(prompt) -> reply``).

    Verdicts are cached per (condition, task id): a frozen store is judged once per task.
    """

    PROMPT = ("You decide whether a stored correction applies to a new task.\n"
              "<condition>\n{condition}\n</condition>\n<task>\n{task}\n</task>\n"
              "Does the condition hold for this task? Answer with exactly one word: YES or NO.")

    def __init__(self, ask: Callable[[str], str], max_task_chars: int = 3000):
        self._ask = ask
        self._max = max_task_chars
        self._cache: dict[tuple[str, str], bool | None] = {}

    def check(self, condition: str, task: TaskContext) -> bool | None:
        key = (condition, task.task_id)
        if key not in self._cache:
            reply = self._ask(self.PROMPT.format(condition=condition, task=task.text[: self._max]))
            self._cache[key] = parse_yes_no(reply)
        return self._cache[key]


def parse_yes_no(reply: str) -> bool | None:
    """First YES/NO word in a reply (small models wrap it in chatter); None if neither appears."""
    m = re.search(r"\b(yes|no)\b", reply, re.IGNORECASE)
    return None if m is None else m.group(1).lower() == "yes"


class CompositeChecker:
    """Asks each checker in turn; ``unknown`` ("include" or "exclude") decides the rest."""

    def __init__(self, checkers: Sequence[ConditionChecker] = (), unknown: str = "include"):
        if unknown not in ("include", "exclude"):
            raise ValueError(f"unknown-condition policy must be 'include' or 'exclude', "
                             f"got {unknown!r}")
        self._checkers = list(checkers) or [RuleChecker()]
        self._unknown = unknown

    def compatible(self, condition: str, task: TaskContext) -> bool:
        if not condition.strip():
            return True
        for checker in self._checkers:
            verdict = checker.check(condition, task)
            if verdict is not None:
                return verdict
        return self._unknown == "include"
