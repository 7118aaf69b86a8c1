"""Whether a model's edit is local: the contract of Module I's generator (paper §3.2, Appendix
D.8: one changed decision unit per candidate, never a complete replacement submission).
"""
import collections

from countermem_jax.method.prompting import parsers

# The clause keywords that give a query (or program) its shape (a change is measured in
# ``parsers.edit_diff``'s tokens: words and single punctuation marks).
_CLAUSES = frozenset({"select", "from", "where", "join", "group", "order", "having", "limit",
                      "union", "intersect", "except", "with"})


def locality_problem(action: str, edited: str) -> str:
    """Why ``edited`` is not one decision unit away from ``action`` ("" when it is).

    Beyond ``parsers.is_local_edit`` (at most two changed regions, at most half the tokens
    removed), which measures only what is removed: the changed regions may not span nearly the
    whole action (a FIND that covers all of it, re-written), may insert at most half the action's
    length (12 tokens always allowed: one join with its keys), and may not add more than one
    clause or any nested query (an insertion that rewrites the query's shape)."""
    a, b, diff = parsers.edit_diff(action, edited)   # once, at a bounded cost
    if not parsers.is_local_edit(action, edited, diff=(a, b, diff)):
        return "changes more than one part or removes most of the action"
    ops = diff.changes
    if len(a) >= 8 and ops[-1][2] - ops[0][1] >= 0.9 * len(a):
        return "covers the whole action"
    inserted = [t for _, _, _, j1, j2 in ops for t in b[j1:j2]]
    removed = [t for _, i1, i2, _, _ in ops for t in a[i1:i2]]
    if len(inserted) > max(12, len(a) // 2):
        return "inserts more than one part"
    added = collections.Counter(t for t in inserted if t in _CLAUSES)
    added.subtract(t for t in removed if t in _CLAUSES)
    if added["select"] > 0 or sum(n for n in added.values() if n > 0) > 1:
        return "rewrites the query's shape"
    return ""
