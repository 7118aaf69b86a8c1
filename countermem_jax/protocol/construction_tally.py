"""What construction's counterfactual checks came to (Modules I–II, paper §3.2–3.3), counted from
its run log: the construction summary ``phases/build.py`` logs and prints and
``record_at_work`` gives for an empty store.
"""
import collections

from countermem_jax.method.counterfactual import NEVER_HOLDS


REDO = "construction_redo"   # tasks logged but not in the saved store, run again on resume


def standing(events) -> list[dict]:
    """The "counterfactual" events of a run log's ``events`` (all of them, in file order) that
    stand: a task whose events were logged before a kill kept the store from naming it is run
    again on resume after a ``REDO`` event, and counts once, from its last run."""
    kept = []
    for e in events:
        if e.get("event") == REDO:
            redone = set(e.get("task_ids", ()))
            kept = [k for k in kept if k.get("task_id") not in redone]
        elif e.get("event") == "counterfactual":
            kept.append(e)
    return kept


def tally(entries, parse_failures=()) -> dict:
    """What construction's checks came to, from the run log's "counterfactual" entries and the
    parse-failure items: per candidate source (the label each candidate carries: the model's
    edits, each rule family) the checks and verified improvements, the admitted records,
    records refused because their condition never holds, distilled situations that repeated
    themselves (replaced, ``counterfactual.repeats_itself``), and the replies per template that
    could not be parsed (a repaired reply counts once per failed attempt) apart from the
    well-formed replies whose content was refused (no usable edit)."""
    sources: dict[str, dict] = {}
    verified = admitted = never = repeated = 0
    for e in entries:
        row = sources.setdefault(str(e.get("source", "?")),
                                 {"checks": 0, "verified": 0, "screened": 0})
        checked = e.get("checked", True)
        row["checks"] += bool(checked)
        row["screened"] += bool(e.get("screened"))
        # verified: the checker completed and the gain passed ε, i.e. distillation was reached
        better = checked and "admitted" in e
        row["verified"] += better
        verified += better
        admitted += bool(e.get("admitted"))
        never += e.get("reason") == NEVER_HOLDS
        repeated += bool(e.get("situation_repeated"))
    unparseable = collections.Counter(f.get("template", "?") for f in parse_failures
                                      if f.get("kind", "parse") == "parse")
    not_local = sum(f.get("kind") == "not_local" for f in parse_failures)
    no_usable = collections.Counter(f.get("template", "?") for f in parse_failures
                                    if f.get("kind") == "content")
    return {"sources": dict(sorted(sources.items())),
            "checks": sum(r["checks"] for r in sources.values()), "verified": verified,
            "admitted": admitted, "never_holds": never, "repeated_situations": repeated,
            "unparseable": dict(unparseable),
            "no_usable_content": dict(no_usable), "not_local": not_local}


def empty_store_reason(t: dict) -> str:
    """One line saying why construction admitted nothing, with the counts of ``tally``."""
    per = ", ".join(f"{s} {r['verified']}/{r['checks']}" for s, r in t["sources"].items())
    return (f"the store is empty: {t['verified']} of {t['checks']} counterfactual checks verified "
            f"(verified/checks per source: {per or 'no checks'}), {t['never_holds']} refused "
            f"for a condition that never holds, {sum(t['unparseable'].values())} replies "
            f"unparseable ({', '.join(f'{k} {v}' for k, v in t['unparseable'].items()) or '-'}), "
            f"{sum(t['no_usable_content'].values())} well-formed replies with no usable "
            f"content, {t['not_local']} model edits not local, "
            f"{sum(r['screened'] for r in t['sources'].values())} screened out before a check")
