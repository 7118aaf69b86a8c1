"""The condition a record gets from its own verified edit when it has none (paper §3.3: a failed
distillation, or free text a weak backbone cannot judge). Scoping it to its environment alone
would offer it on every question about that database; instead it says what the edit changed, as
the domain reads it (``ActionNames``):

  edit touches [every] any [some]   the request names or implies every name the fix introduced,
                                    and one of the others (an edit naming nothing never holds);
  draft has [...]                   the draft still uses every name only the original used;
  draft lacks [...]                 the draft does not already use all the improved names.

A repair of an error kind the domain names (SQL: ``no such column``) is offered instead after the
same kind of error (``feedback contains``), its ``some`` names going to ``draft has any``.
``memory.fallback_condition`` ("derive" or "exclude") chooses whether such records are offered.
"""
import dataclasses
from typing import Protocol

from countermem_jax.method.conditions.grammar import (Condition, DraftHas, DraftLacks,
                                                      EditTouches, Environment,
                                                      FeedbackContains, listable)


@dataclasses.dataclass(frozen=True)
class EditNames:
    """What an edit touched, as a domain reads it: ``every`` must all be named by a request,
    one of ``some`` must be; ``feedback_kind`` is the kind of error the original's feedback
    reports ("" for none, or where the domain reads errors not); ``refused`` says why the domain
    read the edit as plain text although it may be well formed (too long, too deep), "" if not."""
    every: frozenset[str] = frozenset()
    some: frozenset[str] = frozenset()
    feedback_kind: str = ""
    refused: str = ""


class ActionNames(Protocol):
    """The names an action uses, as one domain reads them (``Domain.names``)."""

    def edit_names(self, original: str, improved: str, feedback: str) -> EditNames:
        """What the edit ``original`` -> ``improved`` touched; ``feedback`` is the checker's on
        the original."""

    def action_names(self, action: str) -> frozenset[str] | None:
        """Every name ``action`` uses, lower-cased; None when the domain cannot read it."""

    # Optional: ``parses(action) -> bool | None``, whether ``action`` is well formed (None: the
    # domain cannot tell); the replay refuses an edit whose result is not (``edit_replay``).


@dataclasses.dataclass(frozen=True)
class Derivation:
    """A derived condition with what it could not hold: ``unlisted`` are the names (or a
    feedback kind) the text form cannot hold (``grammar.listable``), left out of their clause
    and counted; ``refused`` is the domain's reason for reading the edit as text."""
    condition: Condition
    unlisted: tuple[str, ...] = ()
    refused: str = ""

    def __str__(self) -> str:
        return str(self.condition)


def _listed(found, unlisted: list[str]) -> tuple[str, ...]:
    """The sorted names of ``found`` that a list can hold; the others go to ``unlisted``."""
    unlisted.extend(sorted(n for n in found if not listable(n)))
    return tuple(sorted(n for n in found if listable(n)))


def derive(names: ActionNames, original: str, improved: str, environment: str,
           original_feedback: str = "") -> Derivation:
    """The condition the checked edit ``original`` -> ``improved`` supports (module docstring),
    prefixed by ``environment == <env>`` when the task has one."""
    edit = names.edit_names(original, improved, original_feedback)
    unlisted: list[str] = []   # what the text form cannot hold, in the order it was met
    clauses: list = [Environment(environment)] if environment else []
    kind = edit.feedback_kind
    if kind and not listable(kind):
        unlisted.append(kind)
        kind = ""
    if kind:
        clauses.append(FeedbackContains(kind))
    if edit.every and not kind:
        clauses.append(EditTouches(_listed(edit.every, unlisted)))
    if edit.some and kind:   # where the repair goes: a draft that reads one of them
        clauses.append(DraftHas(_listed(edit.some, unlisted), any_=True))
    elif edit.some or not edit.every:
        clauses.append(EditTouches(_listed(edit.some, unlisted), any_=True))
    before, after = names.action_names(original), names.action_names(improved)
    if before is not None and after is not None:
        for clause, only in ((DraftHas, before - after), (DraftLacks, after - before)):
            if held := _listed(only, unlisted):
                clauses.append(clause(held))
    return Derivation(Condition(tuple(clauses)), tuple(unlisted), edit.refused)
