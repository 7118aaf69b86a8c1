"""How well a decoded answer satisfies the original problem: shared by the SAT and SMT encoders."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class ConstraintCheck:
    satisfied: int
    total: int
    violations: tuple[str, ...]

    @property
    def utility(self) -> float:
        """Fraction of the problem's constraints the answer satisfies."""
        return self.satisfied / self.total if self.total else 0.0
