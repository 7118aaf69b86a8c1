"""The counterfactual memory store (paper §3.3 and Appendix B).

  record       the record m = (q, a-, a+, e, c, u) and its strict JSON form (Appendix B.2)
  scoring      admission gate and S_adm (Eq. 4), retention score S_keep (Eq. 5)
  retention    which record leaves at capacity: utility, recency, random, similarity
  reuse        reuse labels y and the update of u (Eq. 6)
  store        the open construction-time store and its frozen, hashed snapshot
  persistence  store files: atomic writes, validation on load, a lock for writers
  summary      a readable report of a store (``python -m countermem_jax.inspect_store``)
  world        the world a record was verified in (checker version, environment digest) and
               whether it has changed since: stale records (docs/method.md)
Retrieval over the store (Eq. 7–8) lives in ``countermem_jax.method.retrieval``; deciding whether
to use a retrieved record is the selector's job (``countermem_jax.method.selector``).
"""
from countermem_jax.method.memory.record import (CheckOutcome, Evidence, MemoryRecord, Provenance,
                                          normalize_condition)
from countermem_jax.method.memory.scoring import AdmissionConfig, AdmissionDecision
from countermem_jax.method.memory.store import FrozenStore, FrozenStoreError, MemoryStore
from countermem_jax.method.memory.persistence import (SnapshotHashMismatch, StoreFormatError, load_store,
                                               load_frozen, save_store, locked_store)
from countermem_jax.method.memory.reuse import reuse_label, update_reuse

__all__ = [
    "CheckOutcome", "Evidence", "MemoryRecord", "Provenance", "normalize_condition",
    "AdmissionConfig", "AdmissionDecision", "FrozenStore", "FrozenStoreError", "MemoryStore",
    "SnapshotHashMismatch", "StoreFormatError", "load_store", "load_frozen", "save_store",
    "locked_store", "reuse_label", "update_reuse",
]
