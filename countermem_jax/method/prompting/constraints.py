"""Output constraints of the structured replies (paper Appendix D.8's output contracts)."""
import dataclasses
import functools
import json
from typing import Callable

import jsonschema

from countermem_jax.backbones.base import OutputConstraint
from countermem_jax.backbones.replies import json_object
from countermem_jax.method.prompting import parsers


@dataclasses.dataclass(frozen=True)
class ReplyFormat:
    """A structured reply: ``schema(**parse_args)`` its JSON schema, ``to_text(obj)`` the object
    written in the template's text contract, ``refused(obj, **parse_args)`` how many of its
    parts break a rule the schema cannot state (counted, then dropped by the parser)."""
    name: str
    schema: Callable[..., dict]
    to_text: Callable[[dict], str]
    refused: Callable[..., int] | None = None
    # The schema a reply is validated against after decoding, when looser than the one decoding
    # is held to (the edits': a FIND outside the action's units is refused edit by edit, not the
    # whole reply, when a server did not enforce the constraint).
    read_schema: Callable[..., dict] | None = None

    def constraint(self, **parse_args) -> OutputConstraint:
        """The call's output constraint."""
        return OutputConstraint.from_schema(self.name, self.schema(**parse_args))

    def reading(self, **parse_args) -> OutputConstraint:
        """What a decoded reply must meet to be read (``read_reply``)."""
        return (OutputConstraint.from_schema(self.name, self.read_schema(**parse_args))
                if self.read_schema else self.constraint(**parse_args))


def _object(properties: dict, required=None) -> dict:
    """A closed JSON object schema (every property required unless told): the form both
    vLLM's strict ``json_schema`` and hosted APIs accept."""
    return {"type": "object", "properties": properties,
            "required": list(required if required is not None else properties),
            "additionalProperties": False}


_TEXT = {"type": "string", "minLength": 1}


def _fields(*names: str) -> ReplyFormat:
    """A reply of named text fields, read as ``NAME: value`` lines."""
    keys = [n.lower() for n in names]
    return ReplyFormat("_".join(keys), lambda **_: _object({k: _TEXT for k in keys}),
                       lambda obj: "\n".join(f"{k.upper()}: {obj.get(k, '')}" for k in keys))


def _edits_text(obj: dict) -> str:
    return "\n".join(f"EDIT {i}\nFIND: {e.get('find', '')}\nREPLACE: {e.get('replace', '')}"
                     for i, e in enumerate(obj.get("edits") or [], 1))


def _edits_refused(obj: dict, action: str, k: int) -> int:
    """Edits whose FIND text is not in the action: the edit grammar's contract (§3.2)."""
    del k
    return sum(parsers._locate(str(e.get("find", "")), action) is None
               for e in obj.get("edits") or [] if isinstance(e, dict))


# Characters a local edit's REPLACE may add beyond the action's length (one clause or column).
REPLACE_MARGIN = 120


def _edits_schema(action: str, k: int, units: bool = True) -> dict:
    """Up to ``k`` edits whose FIND is one of the action's units (``parsers.edit_units``: copied
    from the action by construction; an action of very many units, or ``units=False``, bounds
    FIND by its length instead) and whose REPLACE changes that unit, so is at most the action's
    length plus a margin: a decoder held to the schema can neither invent a FIND nor spend the
    reply's budget on one runaway string (small models loop inside a string)."""
    longest = max(len(action), 1)
    spans = parsers.edit_units(action) if units else []
    find = ({"type": "string", "enum": spans} if spans else
            {"type": "string", "minLength": 1, "maxLength": longest})
    return _object({"edits": {
        "type": "array", "minItems": 1, "maxItems": k,
        "items": _object({"find": find,
                          "replace": {"type": "string", "maxLength": longest + REPLACE_MARGIN}})}})


# Module I (§3.2): up to K local edits, each FIND copied from the action.
LOCAL_EDITS = ReplyFormat("local_edits", _edits_schema, _edits_text, _edits_refused,
                          read_schema=lambda action, k: _edits_schema(action, k, units=False))

# Module II (§3.3): the record's situation and condition ("none" = universal), short texts
# (bounded, as the edit strings are).
_SHORT_TEXT = {"type": "string", "minLength": 1, "maxLength": 400}
DISTILLED = ReplyFormat(
    "distilled_record", lambda **_: _object({"situation": _SHORT_TEXT, "condition": _SHORT_TEXT}),
    lambda obj: f"SITUATION: {obj.get('situation', '')}\nCONDITION: {obj.get('condition', '')}")

# Best-of-N (Appendix D.5): the number of one of the N candidates.
CHOICE = ReplyFormat(
    "choice", lambda n: _object({"choice": {"type": "integer", "minimum": 1, "maximum": n}}),
    lambda obj: f"CHOICE: {obj.get('choice', '')}")


def _steps_text(obj: dict) -> str:
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(obj.get("steps") or [], 1))
    return (f"NAME: {obj.get('name', '')}\nAPPLIES_WHEN: {obj.get('applies_when', '')}\n"
            f"STEPS:\n{steps}")


SKILL = ReplyFormat(
    "skill", lambda **_: _object({"name": _TEXT, "applies_when": _TEXT, "steps": {
        "type": "array", "minItems": 1, "items": _TEXT}}), _steps_text)

STRATEGY = _fields("TITLE", "DESCRIPTION", "CONTENT")
REFLECTION = _fields("REFLECTION")
INSIGHT = _fields("INSIGHT")
TASK = _fields("TASK")

IMPORTANCE = ReplyFormat(
    "importance", lambda **_: _object({"importance": {"type": "integer", "minimum": 1,
                                                      "maximum": 10}}),
    lambda obj: f"IMPORTANCE: {obj.get('importance', '')}")

VERDICT = ReplyFormat(
    "verdict", lambda **_: _object({"verdict": {"enum": ["success", "failure"]}}),
    lambda obj: f"VERDICT: {obj.get('verdict', '')}")


def _operations_text(obj: dict) -> str:
    lines = []
    for op in obj.get("operations") or []:
        name, number, text = str(op.get("op", "")), op.get("number"), op.get("text", "")
        lines.append(f"{name}: {text}" if name == "ADD" else f"{name} {number}: {text}")
    return "\n".join(lines) or "NONE"


# ExpeL's list maintenance: ``number`` is the insight's (0 for ADD); no operation = NONE.
INSIGHT_OPERATIONS = ReplyFormat(
    "insight_operations",
    lambda n: _object({"operations": {"type": "array", "items": _object({
        "op": {"enum": list(parsers.INSIGHT_OPERATIONS)},
        "number": {"type": "integer", "minimum": 0, "maximum": n}, "text": {"type": "string"}})}}),
    _operations_text)


def _calls_text(obj: dict) -> str:
    calls = [f"CALL: {json.dumps(c, ensure_ascii=False)}" for c in obj.get("calls") or []]
    return "\n".join(calls + ["DONE"])


# MemGPT's memory functions: calls to the allowed functions with string arguments.
FUNCTION_CALLS = ReplyFormat(
    "function_calls",
    lambda allowed: _object({"calls": {"type": "array", "items": _object({
        "name": {"enum": list(allowed)},
        "arguments": {"type": "object", "additionalProperties": {"type": "string"}}})}}),
    _calls_text)

def violation(constraint: OutputConstraint, reply: str) -> str:
    """Why ``reply`` breaks ``constraint`` (a JSON schema), or "" when it meets it."""
    obj = json_object(reply)
    if obj is None:
        return "the reply is not one JSON object"
    try:
        err = jsonschema.exceptions.best_match(
            _validator(constraint.json_schema).iter_errors(obj))
    except RecursionError:
        return "the reply is nested too deeply"
    if err is None:
        return ""
    where = "/".join(str(p) for p in err.absolute_path)
    return f"{where + ': ' if where else ''}{err.message[:160]}"


@functools.lru_cache(maxsize=1024)
def _validator(schema_json: str):
    """The validator of one schema (``OutputConstraint.json_schema``, its canonical text), the
    schema checked once (``jsonschema.validate`` checks it against its metaschema at every
    call: most of a phase's CPU at 64 in flight)."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@dataclasses.dataclass(frozen=True)
class Read:
    """A reply as its template's parser reads it: ``text`` in the text contract, the schema
    ``violation`` ("" when none), how many parts were ``refused``, and whether the reply met
    the reading schema at all (``well_formed``)."""
    text: str
    violation: str = ""
    refused: int = 0
    well_formed: bool = True


def read_reply(fmt: ReplyFormat, reply: str, constrained: bool, parse_args: dict) -> Read:
    """Validates ``reply`` against the format's reading schema (``ReplyFormat.reading``) and
    returns it in the text contract.

    A constrained reply that breaks the schema is a violation; an unconstrained one is read as
    JSON when it holds a schema-valid object and left as written otherwise (today's parsing).
    """
    broken = violation(fmt.reading(**parse_args), reply)
    if broken:
        return Read(reply, broken if constrained else "", well_formed=False)
    obj = json_object(reply)
    refused = fmt.refused(obj, **parse_args) if fmt.refused else 0
    return Read(fmt.to_text(obj), "", refused)
