"""SAT world models: CNF encoding tasks and solving-strategy tasks (python-sat)."""
from evaluators.sat.checker import SATEncodingEvaluator, SATStrategyEvaluator
from evaluators.sat.loaders import encoding_tasks, load_satlib

__all__ = ["SATEncodingEvaluator", "SATStrategyEvaluator", "encoding_tasks", "load_satlib"]
