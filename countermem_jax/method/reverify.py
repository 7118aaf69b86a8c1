"""Stale records checked again under the current checker: kept where they still hold, retired
where they do not (docs/method.md "Stale records"; the world a record was verified in is
``method/memory/world.py``).
"""
import dataclasses
from typing import Sequence

from countermem_jax.method.memory import CheckOutcome, Evidence, MemoryRecord
from countermem_jax.method.memory import world as world_lib
from countermem_jax.method.memory.scoring import _DELTA_TOLERANCE
from countermem_jax.method.memory.store import FrozenStore, MemoryStore
from countermem_jax.method.prompting import prompts

KEPT, RETIRED = "kept", "retired"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What re-verification did to one record: ``status`` is ``KEPT``, ``RETIRED`` or the
    record's world status when it was not checked (current, unstamped, unknown); ``why`` the
    reason it was checked (what changed, or "unstamped"); ``detail`` what the checks said."""
    record_id: str
    source_task_id: str
    status: str
    why: str = ""
    detail: str = ""


def _evidence(outcome) -> CheckOutcome:
    """A checker ``Outcome`` as stored evidence, its feedback clipped as construction clips it."""
    return CheckOutcome(outcome.utility, outcome.success, outcome.completed,
                        prompts.clip(outcome.feedback, "feedback"))


def check_again(record: MemoryRecord, task, evaluator, epsilon: float) -> tuple[Evidence, str]:
    """Both actions of ``record`` checked from the reset of ``task``: the new evidence and ""
    when the record still holds, else why not."""
    state = evaluator.reset(task)
    original = evaluator.evaluate(state, record.original_action)
    improved = evaluator.evaluate(state, record.improved_action)
    evidence = Evidence(_evidence(original), _evidence(improved))
    if not evidence.verified:
        unfinished = original if not original.completed else improved
        return evidence, f"a check did not complete ({unfinished.reason or 'incomplete'})"
    if improved.details.get("reference_empty"):
        return evidence, "the reference result is empty now (a match proves nothing)"
    if not evidence.delta - epsilon > _DELTA_TOLERANCE:
        return evidence, (f"Δ {evidence.delta:+.2f} (U {original.utility:.2f} → "
                          f"{improved.utility:.2f}) does not exceed ε {epsilon:g}")
    return evidence, ""


def reverify(store: MemoryStore | FrozenStore, check: world_lib.WorldCheck,
             include_unstamped: bool = False
             ) -> tuple[MemoryStore | FrozenStore, list[Verdict]]:
    """The store with its stale records checked again (docs/method.md, Stale records), of the
    same kind (open or frozen), snapshot id and config, and one ``Verdict`` per record in store
    order. ``include_unstamped`` checks the records stored before stamps existed too."""
    epsilon = store.config.admission.epsilon
    kept: list[MemoryRecord] = []
    retired: list[dict] = []
    verdicts: list[Verdict] = []
    for record in store.records:
        status = check.status(record)
        checked = status.kind == world_lib.STALE or (
            include_unstamped and status.kind == world_lib.UNSTAMPED
            and record.source_task_id in check.tasks)
        if not checked:
            kept.append(record)
            verdicts.append(Verdict(record.record_id, record.source_task_id, status.kind))
            continue
        why = status.why or "unstamped"
        task = check.tasks[record.source_task_id]
        evidence, failed = check_again(record, task, check.evaluator, epsilon)
        if failed:
            retired.append({"record": record.to_json(), "why": why, "checked": failed})
            verdicts.append(Verdict(record.record_id, record.source_task_id, RETIRED, why,
                                    failed))
            continue
        kept.append(dataclasses.replace(record, evidence=evidence,
                                        verified_under=check.current(record)))
        verdicts.append(Verdict(record.record_id, record.source_task_id, KEPT, why,
                                f"Δ {evidence.delta:+.2f}"))
    meta = dict(store.meta)
    if retired:
        meta["retired"] = list(meta.get("retired", [])) + retired
    cls = FrozenStore if isinstance(store, FrozenStore) else MemoryStore
    return cls(store.config, kept, store.snapshot_id, store.next_seq, store.evictions,
               meta), verdicts


def summary_line(verdicts: Sequence[Verdict]) -> str:
    """The last line the command prints: how many records were kept, retired, left as they were."""
    count = lambda status: sum(v.status == status for v in verdicts)
    return (f"re-verified {count(KEPT) + count(RETIRED)} of {len(verdicts)} records: "
            f"{count(KEPT)} kept, {count(RETIRED)} retired; unchanged: "
            f"{count(world_lib.CURRENT)} current, {count(world_lib.UNSTAMPED)} unstamped, "
            f"{count(world_lib.UNKNOWN)} not in the benchmark")
