"""Generated SMT encoding problems with independent validators."""
import dataclasses
import operator
import random

from evaluators.constraints import ConstraintCheck as Check

_CMP = {"=": operator.eq, "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


@dataclasses.dataclass(frozen=True)
class LinearPuzzle:
    names: tuple[str, ...]
    constraints: tuple[tuple[tuple[int, ...], str, int], ...]  # (coefficients, op, rhs)
    lower: int = 0
    upper: int = 50
    name: str = "linear integer puzzle"

    def _text(self, coeffs, op, rhs) -> str:
        terms = [f"{c}*{n}" if c != 1 else n for c, n in zip(coeffs, self.names) if c]
        return f"{' + '.join(terms).replace('+ -', '- ')} {op} {rhs}"

    def describe(self) -> str:
        lines = [f"Find integers {', '.join(self.names)}, each between {self.lower} and "
                 f"{self.upper} inclusive, such that:"]
        lines += [f"  {self._text(*c)}" for c in self.constraints]
        lines.append("Declare each as an Int constant with exactly that name.")
        return "\n".join(lines)

    def validate(self, values: dict) -> Check:
        violations = []
        for name in self.names:
            v = values.get(name)
            if not isinstance(v, int) or not self.lower <= v <= self.upper:
                violations.append(f"{name} = {v!r} is not an integer in [{self.lower}, {self.upper}]")
        for coeffs, op, rhs in self.constraints:
            vals = [values.get(n) for n in self.names]
            if any(not isinstance(v, int) for v in vals):
                violations.append(f"cannot evaluate {self._text(coeffs, op, rhs)}")
            elif not _CMP[op](sum(c * v for c, v in zip(coeffs, vals)), rhs):
                violations.append(f"violated: {self._text(coeffs, op, rhs)}")
        total = len(self.names) + len(self.constraints)
        return Check(total - len(violations), total, tuple(violations))


_BV_OPS = {
    "xor": (lambda a, b: a ^ b, "bvxor"), "and": (lambda a, b: a & b, "bvand"),
    "or": (lambda a, b: a | b, "bvor"), "add": (lambda a, b: (a + b) & 0xFF, "bvadd"),
    "sub": (lambda a, b: (a - b) & 0xFF, "bvsub"), "mul": (lambda a, b: (a * b) & 0xFF, "bvmul"),
}


@dataclasses.dataclass(frozen=True)
class BitVectorPuzzle:
    names: tuple[str, ...]
    constraints: tuple[tuple[str, str, str, int], ...]  # (op, left, right, result)
    name: str = "bit-vector puzzle"

    def describe(self) -> str:
        lines = [f"Find 8-bit unsigned values {', '.join(self.names)} (SMT-LIB sort (_ BitVec 8)) "
                 "such that, with arithmetic modulo 256:"]
        lines += [f"  ({_BV_OPS[op][1]} {a} {b}) = #x{res:02x}" for op, a, b, res in self.constraints]
        lines.append("Declare each as a (_ BitVec 8) constant with exactly that name.")
        return "\n".join(lines)

    def validate(self, values: dict) -> Check:
        violations = [f"{n} = {values.get(n)!r} is not an 8-bit value" for n in self.names
                      if not isinstance(values.get(n), int) or not 0 <= values[n] <= 255]
        for op, a, b, res in self.constraints:
            va, vb = values.get(a), values.get(b)
            if not (isinstance(va, int) and isinstance(vb, int)) or _BV_OPS[op][0](va, vb) != res:
                violations.append(f"violated: ({_BV_OPS[op][1]} {a} {b}) = #x{res:02x}")
        total = len(self.names) + len(self.constraints)
        return Check(total - len(violations), total, tuple(violations))


def generate(family: str, seed: int):
    rng = random.Random(seed)
    if family == "lia":
        names = tuple("abcdef"[: rng.randint(3, 5)])
        hidden = [rng.randint(0, 50) for _ in names]
        constraints = []
        for _ in range(len(names) + 1):
            coeffs = tuple(rng.choice([-3, -2, -1, 0, 1, 1, 2, 3]) for _ in names)
            if not any(coeffs):
                coeffs = (1,) + coeffs[1:]
            lhs = sum(c * v for c, v in zip(coeffs, hidden))
            op = rng.choice(["=", "<=", ">="])
            rhs = lhs if op == "=" else lhs + rng.randint(0, 5) * (1 if op == "<=" else -1)
            constraints.append((coeffs, op, rhs))
        return LinearPuzzle(names, tuple(constraints))
    if family == "bv":
        names = ("x", "y", "z")[: rng.randint(2, 3)]
        hidden = {n: rng.randint(0, 255) for n in names}
        constraints = []
        for _ in range(len(names) + 1):
            op = rng.choice(sorted(_BV_OPS))
            a, b = rng.sample(names, 2)
            constraints.append((op, a, b, _BV_OPS[op][0](hidden[a], hidden[b])))
        return BitVectorPuzzle(names, tuple(constraints))
    raise ValueError(f"unknown SMT problem family {family!r}")


def _smt_int(value: int) -> str:
    return f"(- {-value})" if value < 0 else str(value)


def reference_script(problem) -> str:
    """A correct SMT-LIB 2 encoding (used to test the checker end to end)."""
    if isinstance(problem, LinearPuzzle):
        lines = ["(set-logic QF_LIA)"] + [f"(declare-const {n} Int)" for n in problem.names]
        lines += [f"(assert (and (>= {n} {problem.lower}) (<= {n} {problem.upper})))"
                  for n in problem.names]
        for coeffs, op, rhs in problem.constraints:
            terms = " ".join(f"(* {_smt_int(c)} {n})" for c, n in zip(coeffs, problem.names) if c)
            lhs = f"(+ {terms} 0)"
            lines.append(f"(assert ({op} {lhs} {_smt_int(rhs)}))")
    else:
        lines = ["(set-logic QF_BV)"] + [f"(declare-const {n} (_ BitVec 8))" for n in problem.names]
        lines += [f"(assert (= ({_BV_OPS[op][1]} {a} {b}) #x{res:02x}))"
                  for op, a, b, res in problem.constraints]
    return "\n".join(lines + ["(check-sat)", "(get-model)"]) + "\n"
