"""World models: executable checkers H(s, a) behind one interface (paper §3.2, Appendix D.1)."""
from evaluators.base import Evaluator, Outcome, State, Task

__all__ = ["Evaluator", "Outcome", "State", "Task"]
