"""A record's checked edit made again on a new draft (Module III, paper §3.4)."""
import functools
import re

from countermem_jax.method import bounded_diff

# A quoted string and a number are one token each (a literal); then words and punctuation runs.
_TOKEN = re.compile(r"'[^']*'|\"[^\"]*\"|\d+(?:\.\d+)?\b|\w+|[^\w\s]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """(lower-cased token, start, end) of each token of ``text``."""
    return [(m.group(0).lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _occurrences(words: list[str], pattern: list[str]) -> list[int]:
    n = len(pattern)
    if not n:
        return list(range(len(words) + 1))
    return [k for k in range(len(words) - n + 1)
            if words[k] == pattern[0] and words[k:k + n] == pattern]


def _shape(token: str) -> str:
    """What a context token must match: a literal's kind ("<number>", "<string>"), else the
    token itself."""
    if _NUMBER.fullmatch(token):
        return "<number>"
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return "<string>"
    return token


def _placed(words: list[str], shapes: list[str], lhs: list[str], removed: list[str],
            rhs: list[str], open_literals: bool) -> list[int]:
    """Positions k where ``lhs + removed + rhs`` starts in the draft (``words``); with
    ``open_literals`` a literal of the context matches any literal of its kind (``shapes``:
    the draft's token shapes), the removed tokens always exactly."""
    if not open_literals:
        return _occurrences(words, lhs + removed + rhs)
    n_l, n_r = len(lhs), len(removed)
    want_l, want_r = [_shape(t) for t in lhs], [_shape(t) for t in rhs]
    return [k for k in range(len(words) - n_l - n_r - len(rhs) + 1)
            if shapes[k:k + n_l] == want_l and words[k + n_l:k + n_l + n_r] == removed
            and shapes[k + n_l + n_r:k + n_l + n_r + len(rhs)] == want_r]


def _contexts(left: list[str], right: list[str]):
    """The (left, right) context pairs that may locate a hunk, longest first."""
    for n in range(max(len(left), len(right)), 0, -1):
        yield from ((left[-n:], right[:n]), (left[-n:], []), ([], right[:n]))


def reported_name(feedback: str) -> str:
    """The last name a checker's feedback reports, its qualifier dropped (``no such column:
    T2.MPG`` → ``mpg``), "" when it reports none."""
    m = re.search(r":\s*([\w.]+)\s*$", (feedback or "").strip().splitlines()[0]
                  if (feedback or "").strip() else "")
    return m.group(1).rsplit(".", 1)[-1].lower() if m else ""


# Actions longer than this, or edits of more hunks, are not replayed: placing a hunk scans the
# draft once per context length, and a record's checked edit is local (one or two hunks).
MAX_REPLAY_CHARS = 10_000
MAX_REPLAY_HUNKS = 8


def too_long(*actions: str) -> bool:
    """Whether an action is past ``MAX_REPLAY_CHARS`` (``replay_edit`` then does not replay)."""
    return max(map(len, actions)) > MAX_REPLAY_CHARS


def _kept_names(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int,
                context: int) -> tuple[int, int]:
    """(left, right): how many context tokens of a− a hunk's place must keep on each side, the
    names the hunk means. A qualifier changed, dropped or put in (``T2`` → ``T1`` before
    ``.Directed_by``, ``people .`` before ``Birth_Date``) keeps the qualified name on its
    right; an alias changed or put in (``AS T2``) keeps the aliased name on its left."""
    removed, added = a[i1:i2], b[j1:j2]
    right = 0
    if a[i2:i2 + 1] == ["."]:
        right = 2                        # ". name": the hunk is (or ends in) a qualifier
    elif (removed and removed[-1] == ".") or (added and added[-1] == "."):
        right = 1                        # the hunk's own "." qualifies the next name
    left = 0
    if a[i1 - 1:i1] == ["as"] and i1 >= 1:
        left = 2                         # "name AS": the hunk is the alias
    elif (removed and removed[0] == "as") or (added and added[0] == "as"):
        left = 1                         # the hunk's own "AS" names what precedes it
    return min(left, i1, context), min(right, len(a) - i2, context)


def replay_edit(original: str, improved: str, draft: str, feedback: str = "",
                context: int = 2, original_feedback: str | None = None,
                names=None) -> str | None:
    """``draft`` with every hunk of the edit ``original`` → ``improved`` made at its place, or
    None when a hunk has no place (the record does not fit), the result equals the draft or is
    not well formed (``names.parses`` False, where the domain's names hook has one), or the edit
    is too large to place at a bounded cost (an action over ``MAX_REPLAY_CHARS``, more than
    ``MAX_REPLAY_HUNKS`` hunks, a change too long to align). ``feedback`` is the checker's
    feedback on the draft itself ("" when the draft has not been checked); ``context`` tokens on
    either side of a hunk locate it; ``original_feedback``, the checker's feedback on
    ``original``, restricts the feedback-named placement to drafts whose feedback reports the
    same name."""
    if too_long(original, improved, draft):
        return None   # too long to place hunks in at a bounded cost: no replay
    feedback = feedback[:MAX_REPLAY_CHARS]
    a_toks, b_toks, d_toks = _tokens(original), _tokens(improved), _tokens(draft)
    a, b, d = ([t[0] for t in toks] for toks in (a_toks, b_toks, d_toks))
    d_shapes = [_shape(t) for t in d]
    named = [t[0] for t in _tokens(feedback)]
    if (original_feedback is not None
            and reported_name(original_feedback[:MAX_REPLAY_CHARS]) != reported_name(feedback)):
        named = []   # the draft's checker reports another mistake than the record's did
    spans: list[tuple[int, int, str]] = []   # (start, end, new text) in the draft
    diff = bounded_diff.opcodes(a, b)
    if not diff.exact or len(diff.changes) > MAX_REPLAY_HUNKS:
        return None
    for tag, i1, i2, j1, j2 in diff.changes:
        removed = a[i1:i2]
        added = improved[b_toks[j1][1]:b_toks[j2 - 1][2]] if j2 > j1 else ""
        left, right = a[max(0, i1 - context):i1], a[i2:i2 + context]
        keep_l, keep_r = _kept_names(a, b, i1, i2, j1, j2, context)
        place = None
        for lhs, rhs in _contexts(left, right):
            if (len(lhs) + len(rhs) < (1 if removed else context)
                    or len(lhs) < keep_l or len(rhs) < keep_r):
                continue
            for open_literals in (False, True):
                hits = _placed(d, d_shapes, lhs, removed, rhs, open_literals)
                if len(hits) == 1:
                    place = hits[0] + len(lhs)
                    break
            if place is not None:
                break
        if place is None and removed:
            # the removed text with the names it keeps, where the draft's checker named it
            core = left[len(left) - keep_l:] + removed + right[:keep_r]
            found = _occurrences(named, core) and _occurrences(d, core)
            if not found:
                return None               # a hunk without a place: the record does not fit
            spans += [(d_toks[k + keep_l][1], d_toks[k + keep_l + len(removed) - 1][2], added)
                      for k in found]
            continue
        if place is None:
            return None                   # a hunk without a place: the record does not fit
        if removed:
            spans.append((d_toks[place][1], d_toks[place + len(removed) - 1][2], added))
        else:
            # An insertion between draft tokens place-1 and place, spaced as in ``improved``.
            start = d_toks[place - 1][2] if place > 0 else 0
            end = d_toks[place][1] if place < len(d_toks) else len(draft)
            lo = b_toks[j1 - 1][2] if j1 > 0 else 0
            spans.append((start, end, improved[lo:b_toks[j2][1]] if j2 < len(b_toks)
                          else improved[lo:]))
    edited, bound = draft, len(draft)
    for start, end, text in sorted(spans, reverse=True):
        if end > bound:        # two hunks claim overlapping text: the edit does not fit
            return None
        edited, bound = edited[:start] + text + edited[end:], start
    edited = edited.strip()
    if edited == draft.strip() or not well_formed(edited, names):
        return None
    return edited


def well_formed(action: str, names=None) -> bool:
    """Whether ``action`` is well formed as far as the domain can tell: its names hook's
    ``parses`` where it has one and decides (True or False), else True."""
    parses = getattr(names, "parses", None)
    return parses is None or parses(action) is not False


def record_fits(record, task, names=None) -> bool:
    """Whether ``record``'s whole edit has its place in the decision's draft (``task``: a
    retrieval ``TaskFacts``, its ``draft_feedback`` the checker's feedback on that draft; outside
    a decision, with no draft, every record fits); ``names``: the domain's names hook. Under
    ``memory.revision=replay`` retrieval offers only records that fit, so the condition check
    and the replay agree: a record is compatible where it can change the draft."""
    if task.draft is None:
        return True
    return replay(record, task.draft, task.draft_feedback or "", names) is not None


def place_test(names=None):
    """``record_fits`` for one domain (``names``: its ``ActionNames`` hook): the test retrieval
    applies under ``memory.revision=replay`` (``RetrievalIndex.fits``)."""
    return functools.partial(record_fits, names=names)


def replay(record, draft: str, feedback: str = "", names=None) -> str | None:
    """``replay_edit`` of a stored record on ``draft`` (``feedback``: the checker's on the draft
    itself), with the record's own feedback (its evidence) as ``original_feedback``."""
    return replay_edit(record.original_action, record.improved_action, draft, feedback,
                       original_feedback=record.evidence.original.feedback, names=names)
