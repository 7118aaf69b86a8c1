"""The three phases of Algorithm 1 (paper Appendix C.3), as library calls the binaries wrap."""
from countermem_jax.phases import (METHOD_LABELS, PhaseError, Workdir, build_memory, evaluate,
                                   train_selector)

__all__ = ["build_memory", "train_selector", "evaluate", "METHOD_LABELS", "PhaseError",
           "Workdir"]
