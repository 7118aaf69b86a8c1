"""The normal form of a condition's text (paper Appendix B.2): the model's literal "none" (and
friends) means no condition. Below the reply parsers and the memory record, so neither imports
the other."""
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
