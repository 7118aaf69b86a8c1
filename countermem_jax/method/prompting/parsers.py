"""Parsers that enforce each prompt's output contract (paper Appendix D.8)."""
import bisect
import dataclasses
import itertools
import json
import re

from countermem_jax.method import bounded_diff
from countermem_jax.method.conditions.text import normalize_condition


class ParseError(ValueError):
    """The reply does not meet the template's contract; the message says how."""


# A fence's language tag and body; the closing fence may be missing when a reply was cut off at
# the token limit, and the body up to the end is still taken.
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n?(.*?)(?:```|$)", re.S)


def strip_markup(text: str) -> str:
    """The reply without Markdown bold/underline markers around field names."""
    return re.sub(r"\*\*|__", "", text).strip()


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag in lower case, body) of every non-empty code fence, an unclosed last one
    included."""
    return [(lang.lower(), body.strip("\n")) for lang, body in _FENCE.findall(text)
            if body.strip()]


def parse_action(text: str, fences: tuple[str, ...] = (), extract=None) -> str:
    """The action in a reply: the first fenced block tagged with one of ``fences`` (or
    ``action``), else the first fenced block, else the whole reply without an ``ACTION:`` /
    ``Answer:`` / ``SQL:`` label; then ``extract`` (the domain's own extraction, e.g. the SQL
    statement) if given. The domain supplies ``fences`` and ``extract``
    (``countermem_jax/domains/base.Domain.parse_action``)."""
    blocks = fenced_blocks(text)
    body = None
    # A reply may hold several blocks (e.g. the schema it looked at, then its query); the
    # domain's own language tag marks the action.
    for lang, block in blocks:
        if lang in fences or lang == "action":
            body = block
            break
    if body is None and blocks:
        body = blocks[0][1]
    if body is None:
        body = re.sub(r"^\s*(?:ACTION|Answer|SQL)\s*:\s*", "", text.strip(), flags=re.I)
    if extract is not None:
        body = extract(body)
    body = body.strip()
    if not body:
        raise ParseError("no action found: put the action in a ``` code block")
    return body


def _fields(text: str, names: tuple[str, ...]) -> dict[str, str]:
    """``NAME: value`` fields (values may span lines until the next field)."""
    clean = strip_markup(text)
    # A field name at a line start, after any quote, heading or list markers models put there.
    pattern = re.compile(r"^[ \t>#*-]*(" + "|".join(names) + r")[ \t]*:[ \t]*", re.I | re.M)
    hits = list(pattern.finditer(clean))
    out = {}
    for i, m in enumerate(hits):
        end = hits[i + 1].start() if i + 1 < len(hits) else len(clean)
        key = m.group(1).upper()
        # The first occurrence wins: models often restate a field in an explanation afterwards.
        if key not in out:
            value = clean[m.end():end].strip()
            value = re.sub(r"^```\w*\n?|```$", "", value).strip()
            out[key] = value
    return out


def require_fields(text: str, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """The ``NAME: value`` fields of a reply; ParseError naming any of ``names`` missing."""
    found = _fields(text, names + optional)
    missing = [n for n in names if not found.get(n)]
    if missing:
        raise ParseError(f"missing field(s) {', '.join(n + ':' for n in missing)}")
    return found


# Words and single punctuation marks: the units in which ``is_local_edit`` measures a change.
_TOKENS = re.compile(r"\w+|[^\w\s]")


def edit_diff(original: str, edited: str) -> tuple[list, list, bounded_diff.Diff]:
    """The tokens of both texts (lower-cased: re-printing a query may upper-case its keywords
    without changing it) and the bounded diff between them."""
    a, b = _TOKENS.findall(original.lower()), _TOKENS.findall(edited.lower())
    return a, b, bounded_diff.opcodes(a, b)


def is_local_edit(original: str, edited: str, max_removed_fraction: float = 0.5,
                  diff: tuple | None = None) -> bool:
    """One decision unit changed: at most two changed token regions, and at most half of the
    original's tokens removed or replaced (at least 3 always allowed). A changed region too
    long to align within ``bounded_diff``'s bound is no one decision unit: not local.
    ``diff``: ``edit_diff(original, edited)`` when the caller has it already."""
    a, _, found = diff or edit_diff(original, edited)
    ops = found.changes
    removed = sum(i2 - i1 for _, i1, i2, _, _ in ops)
    return found.exact and 0 < len(ops) <= 2 and removed <= max(3, max_removed_fraction * len(a))


# The whitespace-tolerant FIND match scans the action once per word of FIND: bounded by
# (characters of the action) x (words of FIND), past which only the exact match is tried.
LOCATE_CELLS = 2_000_000


def _locate(find: str, action: str) -> tuple[int, int] | None:
    """Where FIND occurs in the action: exactly, or up to differences in whitespace."""
    # Models re-wrap and re-indent the text they copy into FIND; an exact match is tried first.
    i = action.find(find)
    if i >= 0:
        return i, i + len(find)
    parts = find.split()
    if not parts or len(parts) * len(action) > LOCATE_CELLS:
        return None
    m = re.search(r"\s+".join(re.escape(part) for part in parts), action)
    return (m.start(), m.end()) if m else None


# Where one decision unit of an action ends and the next begins: a line break, a comma, or a
# clause keyword of SQL (the same split serves code, whose units are mostly its lines).
_UNIT_BREAK = re.compile(r"\n|,|\b(?:select|from|where|join|on|and|or|group\s+by|order\s+by|"
                         r"having|limit|union|intersect|except)\b", re.I)
_CLAUSE_START = re.compile(r"\b(?:select|from|where|(?:left\s+|inner\s+)?join|group\s+by|"
                           r"order\s+by|having|limit)\b", re.I)


def edit_units(action: str, limit: int = 120) -> list[str]:
    """The spans of ``action`` one local edit may replace (its FIND, paper §3.2): each line, each
    clause (from one clause keyword to the next) and each piece between commas and keywords, as
    written in the action, distinct, in order of first appearance; [] when there are more than
    ``limit`` (the edit reply then bounds FIND by its length only)."""
    spans = [m.group(0) for m in re.finditer(r"[^\n]+", action)]
    starts = [m.start() for m in _CLAUSE_START.finditer(action)] + [len(action)]
    spans += [action[a:b] for a, b in zip(starts, starts[1:])]
    cuts = [0] + [x for m in _UNIT_BREAK.finditer(action) for x in (m.start(), m.end())] + \
        [len(action)]
    spans += [action[a:b] for a, b in zip(cuts[::2], cuts[1::2])]
    units = list(dict.fromkeys(s.strip() for s in spans if s.strip()))
    units = [u for u in units if u != action.strip()] or units
    return units if len(units) <= limit else []


def parse_local_edits(text: str, action: str, k: int) -> list[str]:
    """GENERATE_LOCAL_ALTERNATIVES: up to k edits "FIND: <text from the action> / REPLACE: <text>".

    FIND must occur in the action (whitespace may differ) and the edit must be local
    (``is_local_edit``): a rewrite of the whole action is a replacement submission and is dropped.
    Returns the edited actions (distinct, different from the original).
    """
    clean = strip_markup(text)
    out, problems = [], []
    for find, replace in itertools.islice(_edit_pairs(clean), MAX_EDITS_READ):
        find, replace = _unquote(find), _unquote(replace)
        span = _locate(find, action) if find else None
        if span is None:
            problems.append(f"FIND text {find[:40]!r} does not occur in the action")
            continue
        edited = action[: span[0]] + replace + action[span[1]:]
        if edited == action or edited in out:
            continue
        if not is_local_edit(action, edited):
            problems.append("an edit rewrote most of the action (change one part only)")
            continue
        out.append(edited)
        if len(out) == k:
            break
    if not out:
        raise ParseError("no usable edit: write each as 'FIND: <exact text from the action>' then "
                         "'REPLACE: <new text>'" + (f" ({problems[0]})" if problems else ""))
    return out


# A reply's first this many FIND/REPLACE pairs are read; a reply of thousands of FIND lines
# costs no more than that.
MAX_EDITS_READ = 32
_FIND = re.compile(r"FIND\s*:", re.I)
_SPACES = re.compile(r"\s*")
_REPLACE_LINE = re.compile(r"^[^\S\n]*REPLACE\s*:\s*", re.I | re.M)
_REPLACE_HEAD = re.compile(r"^(?=[^\S\n]*REPLACE\s*:)", re.I | re.M)   # zero-width: each line
_STOP_LINE = re.compile(r"^[^\S\n]*(?:EDIT\b|FIND\s*:|\d+[.)])", re.I | re.M)


def _edit_pairs(text: str):
    """(FIND text, REPLACE text) of each edit in ``text``, in order, in linear time. FIND runs
    to the next line that starts with ``REPLACE:``; a REPLACE body runs to the end of the last
    line before the next EDIT / FIND / numbered item (or the end), so multi-line replacements
    survive."""
    replace_lines = [m.start() for m in _REPLACE_HEAD.finditer(text)]
    pos = 0
    while m := _FIND.search(text, pos):
        # the first REPLACE line with at least one character of FIND text before its newline,
        # the text read after the spaces that follow ``FIND:`` (or, failing that, in them)
        for start in (_SPACES.match(text, m.end()).end(), m.end()):
            k = bisect.bisect_left(replace_lines, start + 2)
            if k < len(replace_lines):
                break
        else:
            return
        line = replace_lines[k]
        body = _REPLACE_LINE.match(text, line).end()
        # the body ends at the newline after its last non-blank line before the next item
        newline = text.find("\n", body)
        stop = _STOP_LINE.search(text, newline + 1) if newline >= 0 else None
        limit = stop.start() if stop else len(text)
        last = body + len(text[body:limit].rstrip())
        end = text.find("\n", last, limit) if last < limit else -1
        end = len(text) if end < 0 else end
        yield text[m.end():line - 1], text[body:end]
        pos = end


def _unquote(s: str) -> str:
    """The text with a wrapping code fence or matching quotes removed (how models set off the
    FIND and REPLACE text)."""
    s = s.strip()
    # (?<!\s): a closing fence's spaces are matched from their start only (linear in a run)
    s = re.sub(r"^```\w*\s*|(?<!\s)\s*```$", "", s).strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "`'\"":
        s = s[1:-1]
    return s.strip()


@dataclasses.dataclass(frozen=True)
class DistilledRecord:
    """DISTIL_RECORD's output (Module II, paper §3.3): the situation and its applicability
    condition."""
    situation: str
    condition: str  # "" = universal


def parse_distilled(text: str, max_condition_chars: int = 300) -> DistilledRecord:
    """DISTIL_RECORD: 'SITUATION:' and 'CONDITION:' (normalized; "none"/"always" = universal)."""
    f = require_fields(text, ("SITUATION", "CONDITION"))
    # One line only: the condition is a requirement to check, not an explanation.
    condition = normalize_condition(f["CONDITION"].splitlines()[0] if f["CONDITION"] else "")
    if len(condition) > max_condition_chars:  # small models explain at length: keep the first sentence
        condition = re.split(r"(?<=[.;!?])\s", condition, maxsplit=1)[0].strip()
    if len(condition) > max_condition_chars:
        raise ParseError(f"CONDITION is longer than {max_condition_chars} characters: state one "
                         "checkable requirement")
    # Words that claim universality are stored as the empty condition, which is what they mean
    # to the compatibility rule (Appendix D.8), rather than as a requirement no task can meet.
    if condition and condition.lower() in ("always", "true", "any task", "all tasks"):
        condition = ""
    return DistilledRecord(" ".join(f["SITUATION"].split()), condition)


def parse_choice(text: str, n: int) -> int:
    """BEST_OF_N_JUDGE: 'CHOICE: <k>' with 1 <= k <= n."""
    # An out-of-range choice is a contract violation, not candidate n: the repair round asks again.
    m = re.search(r"CHOICE\s*[:=]\s*\[?(\d+)", strip_markup(text), re.I)
    if not m:
        raise ParseError("reply with 'CHOICE: <number>'")
    k = int(m.group(1))
    if not 1 <= k <= n:
        raise ParseError(f"CHOICE must be between 1 and {n}")
    return k


def parse_single_field(name: str):
    """A parser of one required field ``NAME: <text>`` (whitespace collapsed)."""
    def parse(text: str) -> str:
        value = require_fields(text, (name,))[name]
        return " ".join(value.split())
    return parse


def parse_strategy_item(text: str) -> dict:
    """ReasoningBank-style memory item: TITLE, DESCRIPTION, CONTENT."""
    f = require_fields(text, ("TITLE", "DESCRIPTION", "CONTENT"))
    return {"title": f["TITLE"].splitlines()[0], "description": f["DESCRIPTION"],
            "content": f["CONTENT"]}


def parse_skill(text: str) -> dict:
    """VOYAGER_SKILL: NAME, APPLIES_WHEN and numbered STEPS."""
    f = require_fields(text, ("NAME", "APPLIES_WHEN", "STEPS"))
    steps = [re.sub(r"^\s*(?:\d+[.)]|[-*])\s*", "", s).strip()
             for s in f["STEPS"].splitlines() if s.strip()]
    return {"name": f["NAME"].splitlines()[0], "applies_when": f["APPLIES_WHEN"], "steps": steps}


def parse_look_alike(text: str) -> str:
    """LOOK_ALIKE_TASK: the new task after 'TASK:'."""
    return require_fields(text, ("TASK",))["TASK"]


# ----------------------------------------------------------------------------- baselines
INSIGHT_OPERATIONS = ("ADD", "AGREE", "EDIT", "REMOVE")


_OPERATION = re.compile(r"^[ \t>*-]*(ADD|AGREE|EDIT|REMOVE)\b[ \t]*(?:#|RULE[ \t]*)?(\d+)?"
                        r"[ \t]*[:.)-]?[ \t]*(.*)$", re.I)


def parse_insight_operations(text: str, n_insights: int) -> list[tuple[str, int | None, str]]:
    """EXPEL_UPDATE: lines 'ADD: <insight>', 'AGREE <n>: …', 'EDIT <n>: <new text>',
    'REMOVE <n>: …' (n numbers the current list, 1-based), or 'NONE'. Returns
    (operation, 0-based index or None for ADD, text) in the order written."""
    ops, problems = [], []
    clean = strip_markup(text)
    # Lines that are not operations are ignored; an operation with a missing or out-of-range
    # number is skipped, and named in the error only when no operation is usable.
    for line in clean.splitlines():
        m = _OPERATION.match(line.strip())
        if not m:
            continue
        op, number, body = m.group(1).upper(), m.group(2), " ".join(m.group(3).split())
        if op == "ADD":
            if body:
                ops.append((op, None, body))
            else:
                problems.append("ADD needs the new insight after ':'")
            continue
        if number is None or not 1 <= int(number) <= n_insights:
            problems.append(f"{op} needs the number of an existing insight (1..{n_insights})")
            continue
        if op == "EDIT" and not body:
            problems.append("EDIT needs the new text after ':'")
            continue
        ops.append((op, int(number) - 1, body))
    if not ops and re.search(r"^[^\S\n]*NONE\b", clean, re.I | re.M):
        return []
    if not ops:
        raise ParseError("no operation: write lines 'ADD: <insight>', 'AGREE <n>: …', "
                         "'EDIT <n>: <text>', 'REMOVE <n>: …', or NONE"
                         + (f" ({problems[0]})" if problems else ""))
    return ops


def parse_importance(text: str) -> int:
    """GENERATIVE_AGENTS_IMPORTANCE: 'IMPORTANCE: <1-10>'."""
    m = re.search(r"IMPORTANCE\s*[:=]\s*(\d+)", strip_markup(text), re.I)
    if not m:
        raise ParseError("reply with 'IMPORTANCE: <integer from 1 to 10>'")
    value = int(m.group(1))
    if not 1 <= value <= 10:
        raise ParseError("IMPORTANCE must be an integer from 1 to 10")
    return value


def parse_verdict(text: str) -> str:
    """REASONINGBANK_JUDGE: 'VERDICT: success' or 'VERDICT: failure'."""
    m = re.search(r"VERDICT\s*[:=]\s*(success|failure)\b", strip_markup(text), re.I)
    if not m:
        raise ParseError("reply with 'VERDICT: success' or 'VERDICT: failure'")
    return m.group(1).lower()


MEMORY_TOOLS = {  # MemGPT-style memory functions and their required string arguments
    "core_memory_append": ("block", "content"),
    "core_memory_replace": ("block", "old_content", "new_content"),
    "archival_memory_insert": ("content",),
    "archival_memory_search": ("query",),
}


def parse_function_calls(text: str, allowed: tuple[str, ...]) -> list[dict]:
    """MEMGPT_MANAGE / MEMGPT_RECALL: lines 'CALL: {"name": …, "arguments": {…}}' ending with
    'DONE'; only ``allowed`` functions, each with its string arguments. 'DONE' alone = no call."""
    clean = text.replace("**", "")
    # raw_decode reads exactly one JSON object after each CALL:, so nested braces in arguments
    # and text after the object are handled; any malformed call fails the whole reply.
    decoder = json.JSONDecoder()
    calls = []
    for m in re.finditer(r"CALL\s*:\s*", clean, re.I):
        try:
            obj, _ = decoder.raw_decode(clean, m.end())   # no copy of the rest per CALL
        except (json.JSONDecodeError, RecursionError):
            raise ParseError("a CALL is not followed by one JSON object") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("arguments", {}), dict):
            raise ParseError('write CALL: {"name": "<function>", "arguments": {...}}')
        name, args = obj.get("name"), obj.get("arguments", {})
        if name not in allowed:
            raise ParseError(f"unknown or unavailable function {name!r}; available: "
                             f"{', '.join(allowed)}")
        missing = [a for a in MEMORY_TOOLS[name] if not isinstance(args.get(a), str)]
        if missing:
            raise ParseError(f"{name} needs string argument(s) {', '.join(missing)}")
        calls.append({"name": name, "arguments": {a: args[a] for a in MEMORY_TOOLS[name]}})
    if not calls and not re.search(r"^[^\S\n]*DONE\b", clean, re.I | re.M):
        raise ParseError('write one line per call, CALL: {"name": ..., "arguments": {...}}, '
                         "then DONE (or only DONE)")
    return calls
