"""How the condition c of a memory record (paper Appendix B.2) is read from text: a distilled reply
or a stored record. The model's literal "none" (and friends) means no condition.

It sits below the reply parsers (``prompting/parsers.py``) and the memory record
(``memory/record.py``), which both normalise conditions, so neither imports the other.
"""
_NONE_CONDITIONS = frozenset({"", "none", "n/a", "na", "null", "always", "no condition"})


def normalize_condition(text: str | None) -> str:
    """The model's literal "none" (and friends) means *no* condition: the empty string.

    Appendix D.8: an empty condition is universal for the compatibility rule, so the word "none"
    must not be stored as a requirement that no task could meet. Quotes and a trailing period
    are ignored when recognising these words; any other text is kept as written (stripped, and
    one pair of quotes around all of it removed), so a rule that ends in a quoted phrase
    (``feedback contains "no such column"``) keeps its closing quote.
    """
    if text is None:
        return ""
    cleaned = text.strip()
    if cleaned.strip('"').strip("'").strip().rstrip(".").lower() in _NONE_CONDITIONS:
        return ""
    if len(cleaned) >= 2 and cleaned[0] == cleaned[-1] and cleaned[0] in "\"'":
        cleaned = cleaned[1:-1].strip()
    return cleaned
