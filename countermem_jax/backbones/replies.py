"""A model's reply is untrusted input: made safe at the backbone boundary, before any parser."""
import dataclasses
import json
import re

# Characters per token a reply may average before it is cut: gpt-oss's o200k tokens average
# about 4 characters of prose or code; the longest (runs of spaces or dashes) are a few dozen.
CHARS_PER_TOKEN = 32
# The cap never goes below this, so a small budget (a 32-token verdict) keeps a readable reply.
MIN_REPLY_CHARS = 4096
# A response body larger than this is not read at all (a 1 MB reply fits with room to spare).
MAX_BODY_BYTES = 8 << 20

_SURROGATE_OR_NUL = re.compile("[\ud800-\udfff\x00]")


def reply_char_cap(max_tokens: int) -> int:
    """The most characters a reply to a call with ``max_tokens`` may keep."""
    return max(MIN_REPLY_CHARS, CHARS_PER_TOKEN * int(max_tokens or 0))


def decode_body(body: bytes) -> tuple[str, list[str]]:
    """``body`` as text, invalid UTF-8 replaced by U+FFFD; ["invalid_utf8"] when any was."""
    try:
        return body.decode("utf-8"), []
    except UnicodeDecodeError:
        return body.decode("utf-8", errors="replace"), ["invalid_utf8"]


def clean_text(text) -> tuple[str, list[str]]:
    """``text`` with lone surrogates and NUL replaced by U+FFFD, and what was repaired
    ("not_text" when the value was not a string at all: it becomes "")."""
    if not isinstance(text, str):
        return "", ([] if text is None else ["not_text"])
    reasons = []
    if _SURROGATE_OR_NUL.search(text):
        if "\x00" in text:
            reasons.append("nul")
        if re.search("[\ud800-\udfff]", text):
            reasons.append("surrogate")
        text = _SURROGATE_OR_NUL.sub("\ufffd", text)
    return text, reasons


def sanitize(result, max_tokens: int):
    """``result`` (a ``ChatResult``) with its text and reasoning cleaned and capped; every
    repair added to ``result.malformed`` (comma-separated, in order, each once)."""
    reasons = [r for r in result.malformed.split(",") if r]
    text, found = clean_text(result.text)
    reasoning, found_r = clean_text(result.reasoning)
    cap = reply_char_cap(max_tokens)
    finish = result.finish_reason
    if len(text) > cap or len(reasoning) > cap:
        text, reasoning, finish = text[:cap], reasoning[:cap], "length"
        found.append("over_length")
    for reason in found + found_r:
        if reason not in reasons:
            reasons.append(reason)
    malformed = ",".join(reasons)
    if (text, reasoning, finish, malformed) == (result.text, result.reasoning,
                                                result.finish_reason, result.malformed):
        return result
    return dataclasses.replace(result, text=text, reasoning=reasoning, finish_reason=finish,
                               malformed=malformed)


def json_object(reply: str) -> dict | None:
    """The JSON object a reply holds (whole, in a code fence, or the outermost braces of the
    text), or None."""
    text = (reply or "").strip()
    fence = re.match(r"^```\w*\s*\n?(.*?)\n?```$", text, re.S)
    if fence:
        text = fence.group(1).strip()
    for candidate in (text, text[text.find("{"): text.rfind("}") + 1]):
        try:
            obj = json.loads(candidate)
        except (json.JSONDecodeError, ValueError, RecursionError):   # nested past the stack
            continue
        if isinstance(obj, dict):
            return obj
    return None
