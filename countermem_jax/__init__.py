"""CounterMem-JAX: world-model-verified counterfactual memory for language agents."""

__version__ = "0.1.0"
