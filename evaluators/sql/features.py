"""Task features of a SQL question, for rule-checked applicability conditions."""
import re

_INCLUSIVE = re.compile(r"\b(at least|at most|or more|or less|or fewer|or higher|or lower|no less than|"
                        r"no more than|not less than|not more than|minimum of|maximum of|"
                        r"greater than or equal|less than or equal|inclusive)\b", re.I)
_STRICT = re.compile(r"\b(more than|less than|fewer than|greater than|larger than|smaller than|"
                     r"higher than|lower than|above|below|over|under|older than|younger than|"
                     r"exceeds?|strictly|after|before)\b", re.I)
_UPPER = re.compile(r"\b(at most|or less|or fewer|no more than|less than|fewer than|below|under|"
                    r"younger than|smaller than|lower than|before|maximum of)\b", re.I)
_DISTINCT = re.compile(r"\b(different|distinct|unique)\b", re.I)
_AGG = [("count", r"\b(how many|number of|count)\b"), ("average", r"\b(average|mean)\b"),
        ("sum", r"\b(total|sum)\b"), ("max", r"\b(maximum|max|largest|highest|oldest|most)\b"),
        ("min", r"\b(minimum|min|smallest|lowest|youngest|least)\b")]
_DESC = re.compile(r"\b(highest|most|largest|oldest|descending|biggest|greatest|top)\b", re.I)
_ASC = re.compile(r"\b(lowest|least|smallest|youngest|ascending|fewest)\b", re.I)
_LIMIT = re.compile(r"\b(top \d+|the (most|least|highest|lowest|largest|smallest|oldest|youngest)|"
                    r"which one|first \d+)\b", re.I)


def question_features(question: str) -> dict:
    q = question.lower()
    if _INCLUSIVE.search(q):
        bound = "inclusive"
    elif _STRICT.search(q):
        bound = "strict"
    else:
        bound = "none"
    # "at least" / "at most" state a bound; they must not read as min / max or an ordering.
    rest = re.sub(r"\b(at least|at most|no less than|no more than|not less than|not more than)\b",
                  " ", q)
    aggregate = next((name for name, pat in _AGG if re.search(pat, rest)), "none")
    return {
        "bound": bound,
        "direction": ("upper" if _UPPER.search(q) else "lower") if bound != "none" else "none",
        "distinct": bool(_DISTINCT.search(q)),
        "aggregate": aggregate,
        "ordering": "desc" if _DESC.search(rest) else ("asc" if _ASC.search(rest) else "none"),
        "limit": bool(_LIMIT.search(rest)),
    }
