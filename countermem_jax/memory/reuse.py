"""Reuse labels and the reuse statistic update u <- (1 - ρ)u + ρy (Appendix B.3, Eq. 4).

The label is judged against the memory-free draft at the same decision:
  * executed action unchanged from the draft            -> 0 (the record did nothing);
  * changed and the task is solved                      -> +1;
  * otherwise, with a previous evaluated attempt        -> sign(U(now) − U(previous));
  * otherwise                                           -> 0.
"""
import dataclasses

from countermem_jax.memory.record import MemoryRecord, normalize_action

RHO = 0.3


def reuse_label(draft_action: str, executed_action: str, solved: bool, utility: float,
                previous_utility: float | None) -> int:
    """y ∈ {-1, 0, +1} for one use of a record."""
    if normalize_action(draft_action) == normalize_action(executed_action):
        return 0
    if solved:
        return 1
    if previous_utility is None:
        return 0
    change = utility - previous_utility
    return int(change > 0) - int(change < 0)


def update_reuse(record: MemoryRecord, label: int, rho: float = RHO) -> MemoryRecord:
    """The record after one more observed use (records are immutable; a new one is returned)."""
    if label not in (-1, 0, 1):
        raise ValueError(f"reuse label must be -1, 0 or +1, got {label!r}")
    return dataclasses.replace(
        record,
        reuse_utility=(1.0 - rho) * record.reuse_utility + rho * label,
        uses=record.uses + 1,
        helpful_uses=record.helpful_uses + (label == 1),
        harmful_uses=record.harmful_uses + (label == -1),
    )
