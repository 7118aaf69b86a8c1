"""The three phases of Algorithm 1 (paper Appendix C.3), as library calls the binaries wrap.

  build_memory    Modules I–II on the construction split; the store is saved after every task
                  (atomically, with the processed task ids in its header) and frozen at the end.
  train_selector  DQN on the training split over the frozen store, one real run per selector
                  seed (own initial parameters and exploration key, validation episodes at every
                  checkpoint, best checkpoint by mean validation return; Appendix C.2).
  evaluate        the held-out split, once without memory and once with CounterMem per selector
                  seed, each run in its own directory; store and selectors are verified before
                  and proven unchanged after; per-seed metrics, their mean, std and 95% bootstrap
                  CI, and the cost of building.
Construction and selector training append to ``WORKDIR/log.jsonl`` and evaluation runs to
``WORKDIR/eval/<run>/log.jsonl``; every phase resumes from them after a kill. The phases live in
``countermem_jax.phases`` (one module each); this module is the stable entry point for binaries,
sweeps and notebooks.
"""
from countermem_jax.phases import (METHOD_LABELS, PhaseError, Workdir, build_memory, evaluate,
                                   train_selector)

__all__ = ["build_memory", "train_selector", "evaluate", "METHOD_LABELS", "PhaseError",
           "Workdir"]
