"""A record's condition c (paper §3.3, Appendix B.2) as typed clauses: the one parser (``parse``)
and the one printer (``str``) of its text form, a conjunction joined by ``AND`` (``and``, ``&&``):

  environment == <name>                   Environment       the task's environment (its database)
  feature == value, !=, =                 Compare           a task feature (``bound == inclusive``)
  feature in [v1, v2]                     OneOf
  has feature, not feature                Has
  text|question|prompt contains "phrase"  RequestContains
  feedback contains "phrase"              FeedbackContains  the kind of error the last attempt met
  edit touches [a, b], ... any [a, b]     EditTouches       names the request must name or imply
  draft has [a, b], ... any [a, b]        DraftHas          names the draft the record revises uses
  draft lacks [a, b], ... any [a, b]      DraftLacks        names it does not use all of
  anything else                           FreeText          the paper's free-text condition

The empty condition holds everywhere (Appendix D.8). ``parse`` never fails; ``str`` reproduces
every text ``derive`` writes and raises ``ValueError`` for a clause that would not read back as
itself (``listable`` says which names a list can hold).
"""
import dataclasses
import functools
import re

# A split starts only where a whitespace run starts, so a run of n spaces is scanned once, not
# n times; the splits are those of ``\s+(?:and|&&)\s+``.
_CLAUSE_SPLIT = re.compile(r"(?<!\s)\s+(?:and|&&)\s+", re.IGNORECASE)
_CMP = re.compile(r"^([A-Za-z_][\w.]*)\s*(==|!=|=)\s*(.+)$")
_IN = re.compile(r"^([A-Za-z_][\w.]*)\s+in\s+\[(.*)\]$", re.IGNORECASE)
_HAS = re.compile(r"^(has|not)\s+([A-Za-z_][\w.]*)$", re.IGNORECASE)
_CONTAINS = re.compile(r"^(text|question|prompt|feedback)\s+contains\s+(['\"])(.+)\2$",
                       re.IGNORECASE)
_EDIT = re.compile(r"^edit\s+touches\s+(any\s+)?\[(.*)\]$", re.IGNORECASE)
_DRAFT = re.compile(r"^draft\s+(has|lacks)\s+(any\s+)?\[(.*)\]$", re.IGNORECASE)
# What a name in a bracketed list must not hold: the list's comma, a bracket, a line break, or a
# spaced "and" / "&&" (which would split the condition); nor may it be empty or padded.
_UNLISTABLE = re.compile(r",|\[|\]|\n|\s(?:and|&&)\s", re.IGNORECASE)


def listable(name: str) -> bool:
    """Whether ``derive`` may write ``name`` into a bracketed list: it reads back as itself and
    splits nothing. Brackets would read back, but derived conditions have never held them."""
    return bool(name) and name == name.strip() and not _UNLISTABLE.search(f" {name} ")


def _names(text: str) -> tuple[str, ...]:
    """The names of a bracketed list as written (``a, b`` -> ("a", "b"))."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


@dataclasses.dataclass(frozen=True)
class Environment:
    """``environment == name``: the task runs in this environment (a database, a repository)."""
    name: str

    def __str__(self) -> str:
        return f"environment == {self.name}"


@dataclasses.dataclass(frozen=True)
class Compare:
    """``feature op value`` over a task feature; ``op`` is "==", "=" or "!="."""
    feature: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.feature} {self.op} {self.value}"


@dataclasses.dataclass(frozen=True)
class OneOf:
    """``feature in [v1, v2]``: the feature takes one of the values."""
    feature: str
    values: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.feature} in [{', '.join(self.values)}]"


@dataclasses.dataclass(frozen=True)
class Has:
    """``has feature`` (``present``) or ``not feature``: the feature is set (not empty, 0, False)."""
    feature: str
    present: bool = True

    def __str__(self) -> str:
        return f"{'has' if self.present else 'not'} {self.feature}"


@dataclasses.dataclass(frozen=True)
class RequestContains:
    """``text|question|prompt contains "phrase"``: the request's text holds the phrase."""
    field: str
    phrase: str
    quote: str = '"'

    def __str__(self) -> str:
        return f"{self.field} contains {self.quote}{self.phrase}{self.quote}"


@dataclasses.dataclass(frozen=True)
class FeedbackContains:
    """``feedback contains "phrase"``: the checker's feedback on the last attempt holds the phrase
    (a derived condition's feedback kind, e.g. "no such column")."""
    phrase: str
    quote: str = '"'

    def __str__(self) -> str:
        return f"feedback contains {self.quote}{self.phrase}{self.quote}"


@dataclasses.dataclass(frozen=True)
class _NameList:
    """``KEYWORD [names]`` / ``KEYWORD any [names]``: the shape the three name clauses share."""
    names: tuple[str, ...]
    any_: bool = False
    KEYWORD = ""

    def __str__(self) -> str:
        return f"{self.KEYWORD} {'any ' if self.any_ else ''}[{', '.join(self.names)}]"


class EditTouches(_NameList):
    """``edit touches [names]``: the request names or implies every name (``any_``: one of
    them); the names the verified edit touched."""
    KEYWORD = "edit touches"


class DraftHas(_NameList):
    """``draft has [names]``: the draft the record would revise uses every name (``any_``: one)."""
    KEYWORD = "draft has"


class DraftLacks(_NameList):
    """``draft lacks [names]``: the draft does not use every name (``any_``: uses none of them)."""
    KEYWORD = "draft lacks"


@dataclasses.dataclass(frozen=True)
class FreeText:
    """A clause outside the grammar, kept as written: the paper's free-text condition, which only
    the LLM judge can decide."""
    text: str

    def __str__(self) -> str:
        return self.text


Clause = (Environment | Compare | OneOf | Has | RequestContains | FeedbackContains | EditTouches
          | DraftHas | DraftLacks | FreeText)
# Clauses derived from a verified edit (``derive``): ``memory.fallback_condition`` decides them.
EDIT_CLAUSES = (EditTouches, DraftHas, DraftLacks)


# Clauses up to this many characters are parsed once per process: retrieval checks the same few
# conditions for every decision, and clauses are immutable, so a parsed one can be shared.
_CACHED_CLAUSE_CHARS = 512


def parse_clause(text: str) -> Clause:
    """The typed form of one clause (outer spaces ignored); ``FreeText`` outside the grammar."""
    text = text.strip()
    return _cached_clause(text) if len(text) <= _CACHED_CLAUSE_CHARS else _clause(text)


@functools.lru_cache(maxsize=8192)
def _cached_clause(text: str) -> Clause:
    """``_clause``, remembered."""
    return _clause(text)


def _clause(text: str) -> Clause:
    """The typed form of one stripped clause."""
    if m := _EDIT.match(text):
        return EditTouches(_names(m.group(2)), any_=bool(m.group(1)))
    if m := _DRAFT.match(text):
        kind = DraftHas if m.group(1).lower() == "has" else DraftLacks
        return kind(_names(m.group(3)), any_=bool(m.group(2)))
    if m := _CONTAINS.match(text):
        field, quote, phrase = m.group(1).lower(), m.group(2), m.group(3)
        return (FeedbackContains(phrase, quote) if field == "feedback"
                else RequestContains(field, phrase, quote))
    if m := _IN.match(text):
        return OneOf(m.group(1), _names(m.group(2)))
    if m := _HAS.match(text):
        return Has(m.group(2), present=m.group(1).lower() == "has")
    if m := _CMP.match(text):
        feature, op, value = m.groups()
        if feature.lower() == "environment" and op == "==":
            return Environment(value)
        return Compare(feature, op, value)
    return FreeText(text)


@dataclasses.dataclass(frozen=True)
class Condition:
    """A conjunction of clauses; no clauses: the universal condition."""
    clauses: tuple[Clause, ...] = ()

    @property
    def free_text(self) -> bool:
        """Whether a clause is outside the grammar (rules alone cannot decide the condition)."""
        return any(isinstance(c, FreeText) for c in self.clauses)

    def __str__(self) -> str:
        for clause in self.clauses:
            if parse_clause(str(clause)) != clause:
                raise ValueError(f"the clause {clause!r} cannot be written as condition text: "
                                 "it would read back differently")
        written = " AND ".join(str(c) for c in self.clauses)
        if self.clauses and len(_CLAUSE_SPLIT.split(written)) != len(self.clauses):
            raise ValueError(f"the clauses of {written[:80]!r} would split differently when read")
        return written


def parse(text: str | None) -> Condition:
    """The typed form of a condition's text (never fails; "" and None: the universal condition)."""
    text = (text or "").strip()
    if not text:
        return Condition()
    return Condition(tuple(parse_clause(c) for c in _CLAUSE_SPLIT.split(text)))
