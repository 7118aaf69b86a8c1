"""The three phases of Algorithm 1 (paper Appendix C.3), one module each."""
from countermem_jax.phases.build import build_memory
from countermem_jax.phases.evaluate import METHOD_LABELS, evaluate
from countermem_jax.phases.train import train_selector
from countermem_jax.phases.workdir import PhaseError, Workdir

__all__ = ["build_memory", "train_selector", "evaluate", "METHOD_LABELS", "PhaseError",
           "Workdir"]
