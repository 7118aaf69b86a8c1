"""Deterministic scripted backbone for tests: replies chosen by prompt template, task and text.

A call no rule answers raises, so a test notices an unexpected prompt instead of a default.
"""
import dataclasses
from typing import Callable

from countermem_jax.backbones import tokens
from countermem_jax.backbones.base import (Backbone, ChatResult, Charge, SamplingParams, Usage)


@dataclasses.dataclass
class Rule:
    """One scripted reply and the calls it answers (``None`` matches anything)."""
    reply: str | Callable[[list], str]
    template: str | None = None
    task: str | None = None
    contains: str | None = None
    times: int | None = None   # answer at most this many calls, then let later rules match

    def matches(self, charge: Charge, messages) -> bool:
        """Whether this rule answers a call with ``charge`` and ``messages``."""
        last = messages[-1].get("content", "") if messages else ""
        return ((self.template is None or charge.purpose == self.template)
                and (self.task is None or self.task in charge.decision)
                and (self.contains is None or self.contains in last)
                and (self.times is None or self.times > 0))


class ScriptedBackbone(Backbone):
    """A backbone whose replies come from ``rules``, tried in order; every call is kept in
    ``calls`` and booked in the ledger with tokenizer counts."""
    model_name = "scripted-fake"

    def __init__(self, rules: list[Rule] | None = None, ledger=None):
        super().__init__(ledger)
        self.rules = list(rules or [])
        self.calls: list[tuple[Charge, list]] = []

    def add(self, reply, **match) -> "ScriptedBackbone":
        """Appends a rule (``template=``, ``task=``, ``contains=``, ``times=``); chainable."""
        self.rules.append(Rule(reply, **match))
        return self

    async def chat(self, messages, params: SamplingParams = SamplingParams(),
                   charge: Charge = Charge()) -> ChatResult:
        """The first matching rule's reply; LookupError when no rule answers the call."""
        messages = list(messages)
        self.calls.append((charge, messages))
        for rule in self.rules:
            if rule.matches(charge, messages):
                if rule.times is not None:
                    rule.times -= 1
                text = rule.reply(messages) if callable(rule.reply) else rule.reply
                usage = Usage(tokens.count_messages(messages), tokens.count_tokens(text), 0,
                              "tokenizer")
                result = ChatResult(text, "", usage, self.model_name)
                (charge.ledger or self.ledger).record(charge, usage)
                return result
        raise LookupError(f"no scripted reply for template={charge.purpose!r} "
                          f"decision={charge.decision!r}: {messages[-1]['content'][:200]!r}")

    async def _chat(self, messages, params):  # pragma: no cover - chat() is overridden
        raise NotImplementedError
