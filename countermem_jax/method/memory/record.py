"""The memory record m = (q, a-, a+, e, c, u) with its source task and provenance (Appendix B.2)."""
import dataclasses
import hashlib
import json
import math
import re
import typing
from typing import Any, Mapping

from countermem_jax.method import bounded_diff
from countermem_jax.method.conditions.text import normalize_condition


def normalize_action(text: str) -> str:
    """Whitespace-insensitive form of an action, used to compare actions and to detect duplicates."""
    return re.sub(r"\s+", " ", text).strip().rstrip(";").strip()


# Words and runs of punctuation: ">=" stays one token, so "> → >=" reads as one edit.
_TOKEN = re.compile(r"\w+|[^\w\s]+")


def edit_text(original: str, improved: str) -> str:
    """A token-level description of what changed: "- removed tokens + added tokens".

    For the running example of §3.1, ``age > 18`` → ``age >= 18`` gives "- > + >=". The text is
    lower-cased and independent of where in the action the edit sits, so the same fix applied
    to two different queries yields the same description (the repeated-advice term R).
    """
    a, b = _TOKEN.findall(original.lower()), _TOKEN.findall(improved.lower())
    removed, added = [], []
    for op, i1, i2, j1, j2 in bounded_diff.opcodes(a, b).opcodes:   # bounded cost
        if op != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return f"- {' '.join(removed)} + {' '.join(added)}"


@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """What the world model said about one action, as kept in a record's evidence.

    ``utility`` is U(o) in [0, 1] (correctness or fraction of tests passed, paper §3.3);
    ``success`` is the benchmark's own success criterion; ``completed`` is False when the check
    did not finish (timeout, crash), in which case the outcome is no evidence at all.
    """
    utility: float
    success: bool
    completed: bool
    feedback: str = ""


@dataclasses.dataclass(frozen=True)
class Evidence:
    """The field e of a record: both checks of the contrast, run from the same state (§3.3).

    The original and the edited action are evaluated from a copy or reset of the same s_t, so
    their difference is attributable to the edit alone.
    """
    original: CheckOutcome
    improved: CheckOutcome

    @property
    def delta(self) -> float:
        """Raw utility gain Δ = U(o') − U(o), before any normalisation."""
        return self.improved.utility - self.original.utility

    @property
    def verified(self) -> bool:
        """Both checks ran to completion; an unfinished check proves nothing."""
        return self.original.completed and self.improved.completed


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Where a record came from, so that results can be traced and stores compared.

    ``created_at`` is the UTC time the record was distilled (ISO-8601); ``snapshot_id`` is the id of the
    store the record was built into, so records from different construction runs stay apart.
    """
    domain: str
    benchmark: str
    backbone_model: str
    evaluator: str
    evaluator_version: str
    created_at: str
    snapshot_id: str = ""


@dataclasses.dataclass(frozen=True)
class WorldStamp:
    """The world a record's evidence was checked in: the checker's version and its digest of the
    source task's environment (``Evaluator.environment_digest``: the database file's sha256 for
    SQL, "" where the check reads nothing outside the task). Unlike ``Provenance``, which says
    where the record came from and never changes, the stamp moves when the record is verified
    again (``countermem_jax.reverify_store``); ``method/memory/world.py`` compares it with the
    current world."""
    checker_version: str
    environment: str = ""


@dataclasses.dataclass(frozen=True)
class MemoryRecord:
    """One verified correction.

    Fields follow Appendix B.2: ``situation`` (q), ``original_action`` (a-), ``improved_action``
    (a+), ``evidence`` (e), ``condition`` (c, empty = universal) and ``reuse_utility`` (u). The
    reuse counters feed the selector's use-frequency and helpful-use features;
    ``admission_score`` is S_adm at the time the record entered. ``source_group`` is the
    reference group id of the source task (``evaluators.grouping.group_id``): retrieval never
    offers the record to a task of that group. Records stored before it have none ("", left out
    of their JSON so their stores keep their hashes); retrieval then resolves the group from the
    source task id through the task pool.
    """
    record_id: str
    source_task_id: str
    situation: str
    original_action: str
    improved_action: str
    evidence: Evidence
    condition: str
    provenance: Provenance
    reuse_utility: float = 0.0
    uses: int = 0
    helpful_uses: int = 0
    harmful_uses: int = 0
    admission_score: float = 0.0
    insertion_seq: int = 0
    source_group: str = ""
    # Transfer evidence (docs/method.md): the record's edit replayed on other construction
    # tasks' failed drafts of its database (never its own reference group's), and how many of
    # those replays the checker passed.
    transfer_tries: int = 0
    transfer_verified: int = 0
    # The world the evidence was checked in (``WorldStamp``); None for records stored before
    # stamps existed (left out of their JSON: their stores keep their hashes), never stale.
    verified_under: WorldStamp | None = None

    @property
    def transfer_failed(self) -> bool:
        """Tried on other tasks' drafts and never verified there: a correction of one
        reference's quirk, not a rule; retrieval does not offer it."""
        return self.transfer_tries > 0 and self.transfer_verified == 0

    @property
    def delta(self) -> float:
        """Raw utility gain Δ of the stored contrast (Eq. 2), read from the evidence."""
        return self.evidence.delta

    @property
    def helpful_fraction(self) -> float:
        """Fraction of construction-time uses labelled beneficial; 0 when never used."""
        return self.helpful_uses / self.uses if self.uses else 0.0

    def advice_text(self) -> str:
        """The edit itself (tokens removed, tokens added): what "repeated advice" is judged on, so
        that the same fix on two different queries counts as repetition."""
        return edit_text(self.original_action, self.improved_action)

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form of every field (nested dataclasses become objects).

        ``from_json`` inverts it exactly; the store file (memory/persistence.py) holds these objects.
        A record without transfer evidence or a world stamp leaves those fields out, so a store
        written before they existed keeps its content hash.
        """
        obj = dataclasses.asdict(self)
        if not obj["source_group"]:
            del obj["source_group"]   # a record without one reads and hashes as before
        if not (self.transfer_tries or self.transfer_verified):
            del obj["transfer_tries"], obj["transfer_verified"]
        if self.verified_under is None:
            del obj["verified_under"]
        return obj

    def json_text(self, canonical: bool) -> str:
        """``to_json`` as text: canonical (sorted keys, no spaces: what the store's content hash
        covers) or as a store file line (sorted keys, default spacing). Computed once per record
        object (records are immutable): a construction run in waves saves the whole store, and
        hashes it, after every task."""
        texts = self.__dict__.get("_json_texts")
        if texts is None:
            obj = self.to_json()
            texts = (json.dumps(obj, ensure_ascii=False, sort_keys=True),
                     json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
            object.__setattr__(self, "_json_texts", texts)
        return texts[canonical]

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> "MemoryRecord":
        """Builds a record from its JSON form; raises ``RecordFieldError`` naming the bad field."""
        return _record_from_json(obj)


def make_record_id(source_task_id: str, situation: str, original: str, improved: str,
                   condition: str) -> str:
    """Content-derived id: the same correction from the same task always gets the same id, which is
    what makes re-running an interrupted build idempotent."""
    payload = json.dumps([source_task_id, situation, normalize_action(original),
                          normalize_action(improved), condition], ensure_ascii=False)
    # a lone surrogate (never in a reply the backbone passed) hashes as "?": no raise
    return hashlib.sha256(payload.encode("utf-8", "replace")).hexdigest()[:20]


class RecordFieldError(ValueError):
    """A stored record has a missing or ill-typed field; ``field`` names it."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"field {field!r}: {problem}")
        self.field = field


def _get(obj: Mapping[str, Any], key: str, types: tuple[type, ...], prefix: str = "") -> Any:
    """Reads ``obj[key]`` and checks it is one of ``types`` (and finite, for numbers).

    ``bool`` is rejected where it is not listed, because ``isinstance(True, int)`` holds and a
    hand-edited ``"uses": true`` must not pass as a count. ``prefix`` is the dotted path of the
    enclosing object, so the error names e.g. ``evidence.original.utility``.
    """
    name = prefix + key
    if not isinstance(obj, Mapping):
        raise RecordFieldError(prefix.rstrip(".") or "<record>", "expected an object")
    if key not in obj:
        raise RecordFieldError(name, "missing")
    value = obj[key]
    if isinstance(value, bool) and bool not in types:
        raise RecordFieldError(name, f"expected {_type_names(types)}, got bool")
    if not isinstance(value, types):
        raise RecordFieldError(name, f"expected {_type_names(types)}, got {type(value).__name__}")
    if float in types and not isinstance(value, bool):
        try:
            finite = math.isfinite(value)
        except OverflowError:
            finite = False
        if not finite:
            raise RecordFieldError(name, f"must be a finite number, got {value}")
    return value


get_field = _get  # the same checks for the store file's header (memory/persistence.py)


def check_dataclass_fields(obj: Any, cls: type, prefix: str) -> None:
    """Checks a JSON object against a dataclass whose fields are int / float / str / bool or nested
    dataclasses: every field present with its annotated type and no other, naming the first bad
    field as ``prefix + name``."""
    if not isinstance(obj, Mapping):
        raise RecordFieldError(prefix.rstrip("."), f"expected an object, got {type(obj).__name__}")
    types = typing.get_type_hints(cls)
    for name in sorted(obj):
        if name not in types:
            raise RecordFieldError(prefix + name, "unknown field")
    for name in sorted(types):
        typ = types[name]
        if dataclasses.is_dataclass(typ):
            _get(obj, name, (Mapping,), prefix)
            check_dataclass_fields(obj[name], typ, f"{prefix}{name}.")
        else:
            _get(obj, name, (int, float) if typ is float else (typ,), prefix)


def _type_names(types: tuple[type, ...]) -> str:
    """``int or float``-style rendering of a type tuple for error messages."""
    return " or ".join(t.__name__ for t in types)


def _outcome(obj: Any, prefix: str) -> CheckOutcome:
    """Parses one ``CheckOutcome``; utilities outside [0, 1] are rejected (U maps into [0, 1])."""
    utility = float(_get(obj, "utility", (int, float), prefix))
    if not 0.0 <= utility <= 1.0:
        raise RecordFieldError(prefix + "utility", f"must lie in [0, 1], got {utility}")
    return CheckOutcome(utility=utility, success=_get(obj, "success", (bool,), prefix),
                        completed=_get(obj, "completed", (bool,), prefix),
                        feedback=_get(obj, "feedback", (str,), prefix))


def _stamp(obj: Any) -> WorldStamp:
    """Parses a record's ``verified_under``: two strings, nothing else."""
    prefix = "verified_under."
    if not isinstance(obj, Mapping):
        raise RecordFieldError("verified_under", f"expected an object, got {type(obj).__name__}")
    for name in sorted(obj):
        if name not in ("checker_version", "environment"):
            raise RecordFieldError(prefix + name, "unknown field")
    return WorldStamp(_get(obj, "checker_version", (str,), prefix),
                      _get(obj, "environment", (str,), prefix))


def _record_from_json(obj: Mapping[str, Any]) -> MemoryRecord:
    """Strict JSON → ``MemoryRecord``: types, ranges and the count invariants are checked.

    Invariants enforced: u in [-1, 1] (an exponential average of labels in {-1, 0, +1}, Eq. 6),
    non-negative counters, and helpful + harmful uses never exceeding all uses. The condition is
    normalised on the way in so that a stored "none" means universal (Appendix D.8).
    """
    evidence_obj = _get(obj, "evidence", (dict,))
    evidence = Evidence(original=_outcome(_get(evidence_obj, "original", (dict,), "evidence."),
                                          "evidence.original."),
                        improved=_outcome(_get(evidence_obj, "improved", (dict,), "evidence."),
                                          "evidence.improved."))
    prov = _get(obj, "provenance", (dict,))
    provenance = Provenance(**{f.name: _get(prov, f.name, (str,), "provenance.")
                               for f in dataclasses.fields(Provenance)})
    reuse = float(_get(obj, "reuse_utility", (int, float)))
    if not -1.0 <= reuse <= 1.0:
        raise RecordFieldError("reuse_utility", f"must lie in [-1, 1], got {reuse}")
    counts = {k: _get(obj, k, (int,)) for k in ("uses", "helpful_uses", "harmful_uses",
                                                "insertion_seq")}
    # stores written before transfer evidence existed have none: 0 tries
    counts |= {k: _get(obj, k, (int,)) for k in ("transfer_tries", "transfer_verified")
               if k in obj}
    for key, value in counts.items():
        if value < 0:
            raise RecordFieldError(key, f"must be >= 0, got {value}")
    if counts["helpful_uses"] + counts["harmful_uses"] > counts["uses"]:
        raise RecordFieldError("uses", "smaller than helpful_uses + harmful_uses")
    if counts.get("transfer_verified", 0) > counts.get("transfer_tries", 0):
        raise RecordFieldError("transfer_tries", "smaller than transfer_verified")
    return MemoryRecord(
        record_id=_get(obj, "record_id", (str,)),
        source_task_id=_get(obj, "source_task_id", (str,)),
        situation=_get(obj, "situation", (str,)),
        original_action=_get(obj, "original_action", (str,)),
        improved_action=_get(obj, "improved_action", (str,)),
        evidence=evidence,
        condition=normalize_condition(_get(obj, "condition", (str,))),
        provenance=provenance,
        reuse_utility=reuse,
        admission_score=float(_get(obj, "admission_score", (int, float))),
        source_group=_get(obj, "source_group", (str,)) if "source_group" in obj else "",
        verified_under=_stamp(obj["verified_under"]) if "verified_under" in obj else None,
        **counts,
    )
