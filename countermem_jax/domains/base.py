"""What an agent needs to know about a domain (paper §3.1): how an action is written and parsed,
which rule edits Module I may try (§3.2, Appendix B.4), and which features a condition may test."""
import dataclasses
from typing import Callable

from countermem_jax.backbones import parsers


@dataclasses.dataclass(frozen=True)
class Domain:
    """``name`` selects the parser's fence languages; ``rule_edits(task, action)`` lists the rule
    operators' local variants of a failed action (empty where Module I allows none)."""
    name: str
    instructions: str
    condition_hint: str
    rule_edits: Callable   # (task, action) -> list[str]

    def parse_action(self, reply: str) -> str:
        return parsers.parse_action(reply, self.name)
