"""Reuse labels and the reuse statistic update u <- (1 - ρ)u + ρy (Appendix B.3, Eq. 6)."""
import dataclasses

from countermem_jax.method.memory.record import MemoryRecord, normalize_action

def reuse_label(draft_action: str, executed_action: str, solved: bool, utility: float,
                previous_utility: float | None) -> int:
    """y ∈ {-1, 0, +1} for one use of a record.

    ``utility`` is U of the executed action; ``previous_utility`` is U of the last evaluated
    attempt on the same task, or None on the first attempt.
    """
    if normalize_action(draft_action) == normalize_action(executed_action):
        return 0
    if solved:
        return 1
    if previous_utility is None:
        return 0
    change = utility - previous_utility
    return int(change > 0) - int(change < 0)


def update_reuse(record: MemoryRecord, label: int, rho: float) -> MemoryRecord:
    """The record after one more observed use (records are immutable; a new one is returned);
    ``rho`` is ρ of Eq. 6, the weight of the newest observation (``memory.reuse_rho``)."""
    if label not in (-1, 0, 1):
        raise ValueError(f"reuse label must be -1, 0 or +1, got {label!r}")
    return dataclasses.replace(
        record,
        reuse_utility=(1.0 - rho) * record.reuse_utility + rho * label,
        uses=record.uses + 1,
        helpful_uses=record.helpful_uses + (label == 1),
        harmful_uses=record.harmful_uses + (label == -1),
    )


def suppressed(record: MemoryRecord, below: float, after_uses: int) -> bool:
    """The gate withholds ``record`` during construction: at least ``after_uses`` observed uses
    (0 = gate off) and reuse utility u < ``below``."""
    return after_uses > 0 and record.uses >= after_uses and record.reuse_utility < below
