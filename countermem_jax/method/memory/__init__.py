"""The counterfactual memory store (paper §3.3 and Appendix B)."""
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
