"""Whether a record's evidence still stands: the world it was checked in against the world now."""
import dataclasses
from typing import Iterable, Sequence

from countermem_jax.method.memory.record import MemoryRecord, WorldStamp

CURRENT, STALE, UNSTAMPED, UNKNOWN = "current", "stale", "unstamped", "unknown"


def stamp(evaluator, task) -> WorldStamp:
    """The world ``evaluator`` checks ``task`` in now: its version and the task's environment
    digest (what a new record is stamped with)."""
    return WorldStamp(evaluator.version, evaluator.environment_digest(task))


def _short(digest: str) -> str:
    """``sha256:1a2b3c4d5e6f…`` for a message; "none" for an empty digest."""
    return (digest[:19] + "…" if len(digest) > 20 else digest) or "none"


def stale_reason(recorded: WorldStamp, current: WorldStamp, environment: str = "") -> str:
    """Why ``recorded`` is not ``current`` ("" when it is): "checker version X → Y",
    "environment ENV changed (old → new)", or both joined by "; "."""
    reasons = []
    if recorded.checker_version != current.checker_version:
        reasons.append(f"checker version {recorded.checker_version} → {current.checker_version}")
    if recorded.environment != current.environment:
        name = f" {environment}" if environment else ""
        reasons.append(f"environment{name} changed ({_short(recorded.environment)} → "
                       f"{_short(current.environment)})")
    return "; ".join(reasons)


@dataclasses.dataclass(frozen=True)
class Status:
    """One record against the current world: ``kind`` is ``CURRENT``, ``STALE`` (``why`` says
    what changed), ``UNSTAMPED`` (stored before stamps) or ``UNKNOWN`` (its source task is not
    in the task pool)."""
    kind: str
    why: str = ""


class WorldCheck:
    """The current world of each record's source task, from the evaluator and the task pool
    (every task the phase or command loaded, looked up by the record's ``source_task_id``).

    Called with a record it returns why the record is stale, "" otherwise: what
    ``RetrievalIndex`` takes as ``world``."""

    def __init__(self, evaluator, tasks: Iterable):
        self.evaluator = evaluator
        self.tasks = {t.task_id: t for t in tasks}

    @property
    def checker_version(self) -> str:
        """The current checker's version."""
        return self.evaluator.version

    def current(self, record: MemoryRecord) -> WorldStamp | None:
        """The world ``record``'s source task is checked in now; None when the pool lacks the
        task. An environment that cannot be read (a database file gone) is a changed one."""
        task = self.tasks.get(record.source_task_id)
        if task is None:
            return None
        try:
            return stamp(self.evaluator, task)
        except OSError as err:
            return WorldStamp(self.evaluator.version,
                              f"unreadable: {err.strerror or type(err).__name__}")

    def status(self, record: MemoryRecord) -> Status:
        """``record`` against the current world (``Status``)."""
        if record.verified_under is None:
            return Status(UNSTAMPED)
        now = self.current(record)
        if now is None:
            return Status(UNKNOWN)
        task = self.tasks[record.source_task_id]
        why = stale_reason(record.verified_under, now, getattr(task, "environment", ""))
        return Status(STALE, why) if why else Status(CURRENT)

    def __call__(self, record: MemoryRecord) -> str:
        """Why ``record`` is stale, or "" (current, unstamped or not checkable)."""
        status = self.status(record)
        return status.why if status.kind == STALE else ""


def report(records: Sequence[MemoryRecord], check: WorldCheck | None = None) -> str:
    """The lines ``inspect_store`` adds about the records' worlds: how many carry a stamp and,
    with ``check`` (the current checker and tasks), each stale record marked with why."""
    unstamped = sum(r.verified_under is None for r in records)
    if check is None:
        return (f"world: {len(records) - unstamped} records stamped with the world they were "
                f"verified in, {unstamped} unstamped (never stale); give --config to check "
                "them against the current checker and data")
    statuses = [(r, check.status(r)) for r in records]
    count = {k: sum(s.kind == k for _, s in statuses) for k in (CURRENT, STALE, UNSTAMPED,
                                                                 UNKNOWN)}
    lines = [f"world (checker version {check.checker_version}): {count[CURRENT]} current, "
             f"{count[STALE]} stale, {count[UNSTAMPED]} unstamped (never stale), "
             f"{count[UNKNOWN]} not checked (source task not in the benchmark)"]
    lines += [f"  STALE {r.record_id}  from {r.source_task_id}: {s.why}"
              for r, s in statuses if s.kind == STALE]
    if count[STALE]:
        lines.append("retrieval refuses stale records; python -m countermem_jax.reverify_store "
                     "checks them again and keeps those that still hold")
    return "\n".join(lines)
