"""Which records transfer: each record's checked edit tried on other construction tasks' failed
actions of the same database (Module II's world model, no LLM call; docs/method.md).
"""
import asyncio
import dataclasses
import re
from typing import Awaitable, Callable, Sequence

from countermem_jax.method.edit_replay import replay, reported_name
from evaluators.grouping import group_key


@dataclasses.dataclass(frozen=True)
class FailedAction:
    """A construction task's failed, evaluated action and its checker feedback (the draft a
    record's replay is tried on)."""
    task_id: str
    decision: int
    action: str
    utility: float
    feedback: str


def failed_actions(decisions: Sequence[dict], phase: str = "construction") -> list[FailedAction]:
    """The distinct failed actions of ``phase``'s ``decision`` events (the run log's), in log
    order; an action whose check met an empty reference is left out (nothing is learnt there)."""
    out, seen = [], set()
    for d in decisions:
        o = d.get("outcome") or {}
        if d.get("phase") != phase or o.get("success") or o.get("reference_empty"):
            continue
        key = (d["task_id"], " ".join(str(d.get("action", "")).split()))
        if key[1] and key not in seen:
            seen.add(key)
            out.append(FailedAction(d["task_id"], int(d.get("decision", 0)), d["action"],
                                    float(o.get("utility") or 0.0), o.get("feedback") or ""))
    return out


Check = Callable[[object, str], Awaitable]   # (task, action) -> the checker's Outcome


def _fixed(failed: FailedAction, replayed: str, feedback: str) -> bool:
    """Whether the replay removed the mistake the checker reported on the failed action and
    brought in none: it reports no name now, or one the failed action used as often."""
    before, after = reported_name(failed.feedback), reported_name(feedback)
    if not before or after == before:
        return False
    count = lambda text: len(re.findall(rf"\b{re.escape(after)}\b", text, re.IGNORECASE))
    return not after or 0 < count(replayed) <= count(failed.action)


async def transfer_checks(records: Sequence, tasks: Sequence, failed: Sequence[FailedAction],
                          check: Check, max_tries: int, epsilon: float = 0.05, names=None
                          ) -> tuple[dict[str, tuple[int, int]], list[dict]]:
    """record id -> (tries, verified), and one log entry per try. ``tasks``: the construction
    tasks (their environment and reference group); ``failed``: their failed actions; at most
    ``max_tries`` tries per record, taken in the order of ``failed``; ``names``: the domain's
    ``ActionNames``, the replay's check that its result is well formed (as at a decision)."""
    by_id = {t.task_id: t for t in tasks}
    plans: list[tuple] = []   # (record, task, failed action, replayed action)
    for record in records:
        source = by_id.get(record.source_task_id)
        if source is None:
            continue
        group, tries = group_key(source), 0
        for f in failed:
            task = by_id.get(f.task_id)
            if (tries >= max_tries or task is None or task.task_id == source.task_id
                    or task.environment != source.environment or group_key(task) == group):
                continue
            replayed = replay(record, f.action, f.feedback, names)
            if replayed is None:
                continue
            tries += 1
            plans.append((record, task, f, replayed))
    outcomes = await asyncio.gather(*(check(task, replayed) for _, task, _, replayed in plans))
    evidence = {r.record_id: (0, 0) for r in records}
    entries = []
    for (record, task, f, replayed), o in zip(plans, outcomes):
        empty = bool((getattr(o, "details", None) or {}).get("reference_empty"))
        fixed = _fixed(f, replayed, o.feedback)
        passed = bool(o.completed and not empty and (o.utility - f.utility > epsilon or fixed))
        tries, verified = evidence[record.record_id]
        evidence[record.record_id] = (tries + 1, verified + passed)
        entries.append({"record_id": record.record_id, "task_id": task.task_id,
                        "decision": f.decision, "original": f.action, "replayed": replayed,
                        "utility": o.utility, "feedback": o.feedback[:200],
                        "verified": passed, "reference_empty": empty})
    return evidence, entries
