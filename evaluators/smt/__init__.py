"""SMT world models: encoding tasks and solver-action tasks (z3, cvc5)."""
from evaluators.smt.checker import SMTEncodingEvaluator, SMTSolverEvaluator
from evaluators.smt.loaders import encoding_tasks, load_smtlib

__all__ = ["SMTEncodingEvaluator", "SMTSolverEvaluator", "encoding_tasks", "load_smtlib"]
