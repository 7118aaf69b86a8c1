"""The bounded record store: admission, eviction, reuse updates and freezing (paper §3.3, App. B).

``freeze()`` turns the construction-time ``MemoryStore`` into a hashed, immutable ``FrozenStore``:
selector training and evaluation hold an object that cannot change records (§4.2, App. C.3).
"""
import dataclasses
import hashlib
import json
import types
import uuid
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from countermem_jax.method.memory import retention, reuse, scoring
from countermem_jax.method.memory.record import MemoryRecord


class FrozenStoreError(RuntimeError):
    """Raised by every attempt to change a frozen snapshot."""


@dataclasses.dataclass(frozen=True)
class StoreConfig:
    """Capacity B and the admission / retention rules, from the config's ``memory`` section (the
    paper's values are stated there, Appendix B.4).

    ``capacity`` counts records, not tasks or tokens (Appendix B.3); ``retention`` is one of
    ``retention.RULES``; ``seed`` drives only the ``random`` rule; ``reuse_rho`` is ρ of Eq. 6.
    The config is part of the content hash: two stores with equal records but different rules
    are different snapshots.
    """
    capacity: int
    retention: str
    seed: int
    admission: scoring.AdmissionConfig
    retention_weights: scoring.RetentionWeights
    reuse_rho: float

    def __post_init__(self):
        if self.capacity < 1:
            raise ValueError(f"store capacity must be >= 1, got {self.capacity}")
        if self.retention not in retention.RULES:
            raise ValueError(f"unknown retention rule {self.retention!r}; "
                             f"expected one of {retention.RULES}")

    def to_json(self) -> dict[str, Any]:
        """Nested plain-JSON form (admission and retention weights as objects)."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> "StoreConfig":
        """Inverse of ``to_json`` (every store file's header has carried every field)."""
        obj = dict(obj)
        obj["admission"] = scoring.AdmissionConfig(**obj["admission"])
        obj["retention_weights"] = scoring.RetentionWeights(**obj["retention_weights"])
        return StoreConfig(**obj)


def sha256_json(obj) -> str:
    """sha256 hex of the canonical JSON (sorted keys, no spaces, UTF-8) of ``obj``."""
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def content_hash(config: StoreConfig, records: Sequence[MemoryRecord]) -> str:
    """sha256 over the canonical JSON of the config and the records in order.

    Covers every record field, reuse statistics included, so any change to u or the use
    counters after freezing is detectable; ``meta`` (run bookkeeping) is deliberately left out.
    """
    # The canonical JSON of {"config": ..., "records": [...]}, assembled from each record's own
    # canonical text (``MemoryRecord.json_text``): the same bytes as ``sha256_json`` of the object.
    payload = "".join(['{"config":', json.dumps(config.to_json(), sort_keys=True,
                                                separators=(",", ":"), ensure_ascii=False),
                       ',"records":[', ",".join(r.json_text(canonical=True) for r in records),
                       "]}"])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# Provenance fields that name the build run itself (its wall-clock time and random store id),
# not what it decided: two builds that admitted the same records differ only in these.
RUN_IDENTITY = ("created_at", "snapshot_id")


def build_hash(config: StoreConfig, records: Sequence[MemoryRecord]) -> str:
    """sha256 over the canonical JSON of the config and the records in order, each record's
    ``RUN_IDENTITY`` left out of its provenance: equal for two builds that made the same
    decisions wherever and whenever they ran (a local and a Ray run of one study), where
    ``content_hash``, the integrity hash every phase checks, differs between any two builds."""
    rows = []
    for r in records:
        row = r.to_json()
        row["provenance"] = {k: v for k, v in row["provenance"].items()
                             if k not in RUN_IDENTITY}
        rows.append(row)
    return sha256_json({"config": config.to_json(), "records": rows})


class _StoreView:
    """Read access shared by the mutable and the frozen store.

    Lookups by id are linear scans: a store holds at most B = 200 records, so an index would
    cost more to keep consistent than it saves.
    """
    config: StoreConfig
    snapshot_id: str

    @property
    def records(self) -> tuple[MemoryRecord, ...]:
        """The records in insertion order, as an immutable tuple."""
        return tuple(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self):
        return iter(self._records)

    def __contains__(self, record_id: str) -> bool:
        return any(r.record_id == record_id for r in self._records)

    def get(self, record_id: str) -> MemoryRecord:
        """The record with ``record_id``; ``KeyError`` naming the store if absent."""
        for r in self._records:
            if r.record_id == record_id:
                return r
        raise KeyError(f"no record {record_id!r} in store {self.snapshot_id}")

    def content_hash(self) -> str:
        """sha256 of the config and the records in order (see ``content_hash``)."""
        return content_hash(self.config, self._records)

    def build_hash(self) -> str:
        """sha256 of the config and the records without their run identity (``build_hash``)."""
        return build_hash(self.config, self._records)


class MemoryStore(_StoreView):
    """Construction-time store: admits verified records, evicts by the retention rule.

    Alongside the records it keeps their advice embeddings (one row per record, same order), so
    admission's repeated-advice term and utility retention do not re-embed the whole store for
    every candidate. ``snapshot_id`` is random per new store and survives save / load.
    """

    def __init__(self, config: StoreConfig, records: Iterable[MemoryRecord] = (),
                 snapshot_id: str | None = None, next_seq: int = 0, evictions: int = 0,
                 meta: dict | None = None):
        self.config = config
        self.meta = dict(meta or {})  # run bookkeeping (e.g. processed tasks); not in the hash
        self.snapshot_id = snapshot_id or uuid.uuid4().hex[:12]
        self._records: list[MemoryRecord] = list(records)
        self._next_seq = max([next_seq] + [r.insertion_seq + 1 for r in self._records])
        self.evictions = evictions
        self._advice = scoring.advice_embeddings(self._records)

    @property
    def next_seq(self) -> int:
        """Insertion sequence the next admitted record will get; recency retention orders by it."""
        return self._next_seq

    def propose(self, candidate: MemoryRecord) -> tuple[scoring.AdmissionDecision, list[str]]:
        """Runs admission; on success inserts the record and evicts down to capacity.

        Returns the decision and the ids evicted (which may include the newcomer itself when it
        ranks lowest under the retention rule).
        """
        # Same content-derived id = the same correction from the same task (re-run of a task).
        if candidate.record_id in self:
            return scoring.AdmissionDecision(False, "duplicate", float("-inf"), candidate.delta,
                                             repeat=1.0), []
        decision = scoring.admission_decision(candidate, self._records, self._advice,
                                              self.config.admission)
        if not decision.admitted:
            return decision, []
        return decision, self._insert(candidate, decision)

    def insert_unverified(self, candidate: MemoryRecord
                          ) -> tuple[scoring.AdmissionDecision, list[str]]:
        """"CF without WM" (§6.1 component ablation): stores proposed advice without the
        verification gate or Eq. 2 (there is no checked gain); an exact duplicate is still refused,
        and capacity and the retention rule apply as for verified records."""
        if candidate.record_id in self or scoring.is_duplicate(candidate, self._records):
            return scoring.AdmissionDecision(False, "duplicate", float("-inf"), candidate.delta,
                                             repeat=1.0), []
        decision = scoring.AdmissionDecision(True, "unverified advice", 0.0, candidate.delta)
        return decision, self._insert(candidate, decision)

    def _insert(self, candidate: MemoryRecord, decision: scoring.AdmissionDecision) -> list[str]:
        record = dataclasses.replace(candidate, admission_score=decision.score,
                                     insertion_seq=self._next_seq,
                                     reuse_utility=candidate.reuse_utility)
        self._next_seq += 1
        self._records.append(record)
        self._advice = np.concatenate([self._advice, scoring.advice_embeddings([record])])
        evicted = []
        while len(self._records) > self.config.capacity:
            evicted.append(self._evict_one())
        return evicted

    def _evict_one(self) -> str:
        """Removes the retention rule's victim (and its embedding row); returns its id."""
        victim = retention.choose_victim(self._records, self._advice, self.config.retention,
                                         self.config.seed, self.evictions,
                                         self.config.retention_weights)
        self.evictions += 1
        record = self._records.pop(victim)
        self._advice = np.delete(self._advice, victim, axis=0)
        return record.record_id

    def copy(self) -> "MemoryStore":
        """An independent copy with the same snapshot id, counters and advice embeddings: what
        construction in waves gives a task as its private view of the committed store, and
        replays the task's changes onto (``countermem_jax.phases.construction_waves``)."""
        twin = MemoryStore.__new__(MemoryStore)
        twin.__dict__.update(self.__dict__)
        twin.meta, twin._records, twin._advice = dict(self.meta), list(self._records), \
            self._advice.copy()
        return twin

    def observe_reuse(self, record_id: str, label: int) -> MemoryRecord:
        """Construction-time reuse feedback: u <- (1-ρ)u + ρy and the use counters."""
        for i, r in enumerate(self._records):
            if r.record_id == record_id:
                self._records[i] = reuse.update_reuse(r, label, self.config.reuse_rho)
                return self._records[i]
        raise KeyError(f"no record {record_id!r} in store {self.snapshot_id}")

    def set_transfer(self, record_id: str, tries: int, verified: int) -> MemoryRecord:
        """A record's transfer evidence (construction's transfer checks, docs/method.md):
        ``tries`` replays on other tasks' failed drafts, ``verified`` of them passed."""
        for i, r in enumerate(self._records):
            if r.record_id == record_id:
                self._records[i] = dataclasses.replace(r, transfer_tries=tries,
                                                       transfer_verified=verified)
                return self._records[i]
        raise KeyError(f"no record {record_id!r} in store {self.snapshot_id}")

    def freeze(self) -> "FrozenStore":
        """An immutable snapshot of the current records and counters, sharing the record objects.

        The open store stays usable; later changes to it do not reach the snapshot.
        """
        return FrozenStore(self.config, self._records, self.snapshot_id, self._next_seq,
                           self.evictions, self.meta)


class FrozenStore(_StoreView):
    """An immutable snapshot. Every mutating call raises ``FrozenStoreError``.

    The content hash is computed once at construction; since nothing can change afterwards it
    stays valid, and phases compare it with the hash recorded when the store was written.
    """

    def __init__(self, config: StoreConfig, records: Iterable[MemoryRecord], snapshot_id: str,
                 next_seq: int = 0, evictions: int = 0, meta: dict | None = None):
        # ``__setattr__`` is disabled below, so the fields are set through ``object``.
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "meta", types.MappingProxyType(dict(meta or {})))
        object.__setattr__(self, "_records", tuple(records))
        object.__setattr__(self, "snapshot_id", snapshot_id)
        object.__setattr__(self, "next_seq", next_seq)
        object.__setattr__(self, "evictions", evictions)
        object.__setattr__(self, "_hash", content_hash(config, self._records))

    def content_hash(self) -> str:
        """The hash computed when the snapshot was made (it cannot go stale)."""
        return self._hash

    def __setattr__(self, name, value):
        raise FrozenStoreError(f"frozen store {self.snapshot_id} is immutable (tried to set {name})")

    def __delattr__(self, name):
        raise FrozenStoreError(f"frozen store {self.snapshot_id} is immutable")

    def _refuse(self, *args, **kwargs):
        """Shared body of every mutating method of a frozen snapshot."""
        raise FrozenStoreError(f"frozen store {self.snapshot_id} is immutable: records, reuse "
                               "statistics and capacity are fixed after construction")

    propose = observe_reuse = _refuse

    def thaw(self) -> MemoryStore:
        """A mutable copy (a new snapshot lineage), e.g. to continue construction."""
        return MemoryStore(self.config, self._records, None, self.next_seq, self.evictions,
                           dict(self.meta))
