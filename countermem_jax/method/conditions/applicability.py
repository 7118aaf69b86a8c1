"""Whether a record's condition holds for a task: the rule half of Eq. 7's eligibility test
(paper §3.4, Appendix B.2), and which conditions can hold for no task at all (§3.3).
Outside a decision (no draft, no feedback) the edit, draft and feedback clauses do not restrict;
a free-text clause is undecided here (None).
"""
import dataclasses
import re
from typing import Any, Mapping

from countermem_jax.method.conditions.grammar import (Compare, Condition, DraftHas, DraftLacks,
                                                      EDIT_CLAUSES, EditTouches, Environment,
                                                      FeedbackContains, FreeText, Has, OneOf,
                                                      RequestContains, parse)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
FALLBACK_POLICIES = ("derive", "exclude")


@dataclasses.dataclass(frozen=True)
class TaskFacts:
    """What a condition may look at: the task's id, its visible text, its features and, at a
    decision, the draft the record would revise.
    ``scope`` (the run) keys the judge's verdict cache, so each task run judges, and pays for,
    its own conditions."""
    task_id: str
    text: str
    features: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scope: str = ""
    draft: str | None = None   # the decision's draft action (Module III), None outside one
    feedback: str | None = None   # the checker's feedback on the last attempt ("" before one)
    # the checker's feedback on the draft itself: the last attempt's where the draft repeats
    # that attempt's action, else "" (a new draft is unchecked); the replay's place test reads it
    draft_feedback: str = ""
    group: str = ""   # the task's reference group id: retrieval never offers its group's records


def _norm(value: Any) -> str:
    """Lower-case string form of a feature value or literal, quotes and outer spaces removed."""
    return str(value).strip().strip("'\"").strip().lower()


def check(condition: Condition, task: TaskFacts, fallback: str = "derive") -> bool | None:
    """Whether every clause holds for ``task``; None when a clause is free text (the rules
    decide no condition on its known half: it goes whole to the LLM judge or the ``unknown``
    policy). ``fallback`` "exclude" makes a clause derived from an edit (``EDIT_CLAUSES``)
    false: records without a condition of their own are kept out of retrieval."""
    features = {k.lower(): v for k, v in task.features.items()}
    # each distinct clause once: a conjunction's verdict does not depend on repeats
    results = [_holds(c, task, features, fallback) for c in dict.fromkeys(condition.clauses)]
    if any(r is None for r in results):
        return None
    return all(results)


def _holds(clause, task: TaskFacts, features: Mapping[str, Any], fallback: str) -> bool | None:
    """One clause's verdict (``features``: the task's, names lower-cased). A comparison on a
    feature the task does not have is False for ``==`` and True for ``!=``: a condition about,
    say, a SQL bound cannot hold for a task that has no bound."""
    if isinstance(clause, EDIT_CLAUSES) and fallback == "exclude":
        return False
    match clause:   # the kinds are disjoint: the order only puts the common ones first
        case Environment(name):
            return "environment" in features and _norm(features["environment"]) == _norm(name)
        case Compare(feature, op, value):
            name = feature.lower()
            if name not in features:
                return op == "!="
            equal = _norm(features[name]) == _norm(value)
            return equal if op in ("==", "=") else not equal
        case EditTouches(names, any_):
            found = [mentions(n, task.text) for n in names]
            return any(found) if any_ else all(found)
        case DraftHas(names, any_) | DraftLacks(names, any_):
            if task.draft is None:
                return True
            used = draft_uses(names, task.draft, any_=any_)
            return used if isinstance(clause, DraftHas) else not used
        case FeedbackContains(phrase):
            return task.feedback is None or phrase.lower() in task.feedback.lower()
        case RequestContains(_, phrase):
            return phrase.lower() in task.text.lower()
        case OneOf(feature, values):
            name = feature.lower()
            return name in features and _norm(features[name]) in {_norm(v) for v in values}
        case Has(feature, present):
            value = features.get(feature.lower())
            return (value not in (None, False, "", 0)) == present
        case FreeText():
            return None
    raise TypeError(f"not a condition clause: {clause!r}")


def never_holds(condition: Condition | str) -> bool:
    """Whether a condition can hold for no task at all: a clause that asks for one of an empty
    list (``edit touches any []``, ``feature in []``, ``draft has any []``), ``draft lacks []``
    (not all of nothing), or one feature required equal to two different values. Such a record
    could never be offered, so admission refuses it (paper §3.3: a condition must be checkable
    and able to hold). Free-text clauses are the judge's and never count here. ``condition``
    may be given as its text."""
    required: dict[str, str] = {}
    for clause in (parse(condition) if isinstance(condition, str) else condition).clauses:
        match clause:
            case EditTouches((), True) | DraftHas((), True) | DraftLacks((), _) | OneOf(_, ()):
                return True
            case Environment(name):
                feature, value = "environment", _norm(name)
            case Compare(feature, "==" | "=", value):
                feature, value = feature.lower(), _norm(value)
            case _:
                continue
        if required.setdefault(feature, value) != value:
            return True
    return False


def draft_uses(names, draft: str, any_: bool = False) -> bool:
    """Whether ``draft`` uses every one of ``names`` (``any_``: one of them): each as a whole
    identifier (any case), or, for a name that is not an identifier (a string literal), as text."""
    idents, text = {w.lower() for w in _IDENT.findall(draft)}, draft.lower()
    return (any if any_ else all)(n.lower() in (idents if _IDENT.fullmatch(n) else text)
                                  for n in names)


def _stem(word: str) -> str:
    """Crude plural stripping (-ies, -es after s/x/z, -s) so "players" matches ``player``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _word_matches(part: str, words: set[str]) -> bool:
    """``part`` equals a word of the request, or one is a prefix of the other (≥ 4 letters).

    The prefix rule lets ``release`` match "released" without a real stemmer; the 4-letter floor
    keeps short parts from matching everything.
    """
    if part in words:
        return True
    for w in words:
        short, long_ = sorted((part, w), key=len)
        if len(short) >= 4 and long_.startswith(short):
            return True
    return False


def mentions(identifier: str, text: str) -> bool:
    """Does the text name or imply the identifier? Every part of it of three or more letters
    (split at ``_``, spaces and camelCase) must appear as a word, up to plural / prefix forms
    ("song_release_year" ~ "songs released in which year"); an identifier with no such part
    (``id``) is implied by any request."""
    words = {_stem(w) for w in _WORD.findall(text.lower())}
    parts = [_stem(p) for p in _WORD.findall(_CAMEL.sub(" ", identifier).lower()) if len(p) >= 3]
    return all(_word_matches(p, words) for p in parts)
