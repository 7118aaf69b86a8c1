"""The one interface everything that talks to the frozen LLM goes through (paper §3.1).

Every call is charged to a phase and a decision in a ``TokenLedger`` here, not in the adapters,
so every backend is charged by the same rule: the token figures of §4.4 and the selector's token
penalty (Eq. 10) both come from it.
"""
import abc
import asyncio
import collections
import dataclasses
import json
import logging
import threading
from typing import Any, Sequence

from countermem_jax.backbones import replies

Message = dict  # {"role": "system" | "user" | "assistant", "content": str}

log = logging.getLogger(__name__)

# The three phases of Algorithm 1 (Appendix C.3); "other" for tools outside a run.
PHASES = ("construction", "selector_training", "evaluation", "other")


@dataclasses.dataclass(frozen=True)
class OutputConstraint:
    """What a structured reply must look like, enforced while decoding where the backend can.

    ``json_schema`` is the canonical JSON text of a JSON schema (text, so the constraint is
    hashable and keys the response cache exactly); ``grammar`` a GBNF grammar, for backends that
    take one. ``name`` names it to the server (vLLM's ``json_schema.name``) and in logs.
    """
    name: str
    json_schema: str = ""
    grammar: str = ""

    @classmethod
    def from_schema(cls, name: str, schema: dict) -> "OutputConstraint":
        """The constraint of a JSON schema given as a dict."""
        return cls(name, json.dumps(schema, sort_keys=True, separators=(",", ":")))

    @property
    def schema(self) -> dict | None:
        """The JSON schema as a dict, or None for a grammar."""
        return json.loads(self.json_schema) if self.json_schema else None

    def to_json(self) -> dict:
        """The constraint as a dict of strings (the response-cache key holds it)."""
        return {"name": self.name, "json_schema": self.json_schema, "grammar": self.grammar}


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """Decoding settings of one call; part of the response-cache key.

    The defaults (greedy, fixed seed) make a call as repeatable as the server allows.
    ``stop`` are stop strings; ``reasoning_effort`` is sent only to servers that accept it.
    """
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    reasoning_effort: str | None = None   # gpt-oss: "low" | "medium" | "high"
    constraint: OutputConstraint | None = None   # the reply's structure, enforced when decoding
    # > 1 discourages repeating recent tokens (llama.cpp's repeat_penalty, vLLM's
    # repetition_penalty); 1 is off and is neither sent nor part of the cache key
    repetition_penalty: float = 1.0

    def to_json(self) -> dict:
        """The settings as a dict (a tuple ``stop`` stays a tuple until JSON-dumped). Every
        field is a scalar or a tuple of strings, so no deep copy (``dataclasses.asdict``, ten
        times slower) is needed: it runs once per chat call, in the response cache's key. An
        unconstrained call leaves ``constraint`` out, and a call without a repetition penalty
        leaves that out, so their keys are what they were before those fields existed."""
        out = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        constraint = out.pop("constraint")
        if out["repetition_penalty"] == 1.0:
            del out["repetition_penalty"]
        if constraint is not None:
            out["constraint"] = constraint.to_json()
        return out


@dataclasses.dataclass(frozen=True)
class Usage:
    """Token counts of one call or a sum of calls.

    ``reasoning_tokens`` are the part of ``completion_tokens`` the server reported as thinking;
    they are not added again to ``total``; None when the server did not say (vLLM reports them
    only with a reasoning parser, in recent releases), and a sum with an unknown part is unknown. ``cached_tokens`` are the part of ``prompt_tokens``
    the server served from its prefix cache (vLLM's ``prompt_tokens_details.cached_tokens``);
    they too stay inside ``total``. Adding usages of different ``source`` gives "mixed".
    """
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int | None = 0
    source: str = "server"   # "server" or "tokenizer" (counted locally when the server gave none)
    cached_tokens: int = 0

    @property
    def total(self) -> int:
        """Prompt plus completion tokens: what a call is charged in the reported token totals."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens,
                     None if None in (self.reasoning_tokens, other.reasoning_tokens)
                     else self.reasoning_tokens + other.reasoning_tokens,
                     self.source if self.source == other.source else "mixed",
                     self.cached_tokens + other.cached_tokens)


@dataclasses.dataclass(frozen=True)
class ChatResult:
    """What one chat call returned.

    ``text`` is the answer channel; ``reasoning`` the thinking the server separated from it (empty
    when none); ``model`` the name the server reported; ``cached`` whether the response cache
    served it; ``server`` which base URL answered (for load and failure diagnosis).
    ``finish_reason`` is the server's ("stop", "length" when the token budget cut the reply off;
    empty when the backend says nothing); ``constrained`` whether the call's output constraint
    was sent to a backend that enforces it (a reply that breaks it then is a violation).
    ``malformed`` names, comma-separated, what the backbone boundary repaired in a reply the
    server sent broken ("invalid_utf8", "surrogate", "nul", "empty_choices", "over_length",
    ...: ``backbones/replies.py``); empty for a well-formed reply. ``failed`` names why the
    server answered no reply at all to a request it could not take ("context_length": prompt
    plus ``max_tokens`` past the server's context): the reply is empty, and the run goes on.
    """
    text: str
    reasoning: str = ""
    usage: Usage = Usage()
    model: str = ""
    cached: bool = False
    server: str = ""
    finish_reason: str = ""
    constrained: bool = False
    malformed: str = ""
    failed: str = ""


class BackboneError(RuntimeError):
    """A request failed for good; the message names the server, the reason and, once
    ``Backbone.chat`` has seen it, the task, template and phase it was made for."""


@dataclasses.dataclass(frozen=True)
class Charge:
    """Where a call's tokens are booked."""
    phase: str = "other"
    decision: str = ""       # e.g. "<task_id>#<decision index>"
    purpose: str = ""        # the prompt template, e.g. "DRAFT_ACTION"
    # a ledger of the caller's (a construction run's, booked in the phase's when it commits)
    # instead of the backbone's
    ledger: Any = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.phase not in PHASES:
            raise ValueError(f"unknown phase {self.phase!r}; expected one of {PHASES}")


class TokenLedger:
    """Thread-safe token and call totals per phase, per decision and per purpose."""

    def __init__(self):
        self._lock = threading.Lock()
        self.by_phase: dict[str, Usage] = collections.defaultdict(Usage)
        self.by_decision: dict[str, Usage] = collections.defaultdict(Usage)
        self.by_purpose: dict[str, Usage] = collections.defaultdict(Usage)
        self.calls: dict[str, int] = collections.Counter()
        self.cached_calls = 0
        # replies the backbone boundary had to repair (``ChatResult.malformed``), per phase
        self.malformed: dict[str, int] = collections.Counter()
        # requests the server could not take (``ChatResult.failed``), per phase and reason
        self.failed: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)

    def record(self, charge: Charge, usage: Usage, cached: bool = False,
               malformed: bool = False, failed: str = "") -> None:
        """Books one call's usage to its phase, decision and purpose; a ``malformed`` reply is
        counted as such under its phase, a ``failed`` request under its phase and reason."""
        with self._lock:
            self.malformed[charge.phase] += bool(malformed)
            if failed:
                self.failed[charge.phase][failed] += 1
            self.by_phase[charge.phase] += usage
            if charge.decision:
                self.by_decision[charge.decision] += usage
            if charge.purpose:
                self.by_purpose[charge.purpose] += usage
            self.calls[charge.phase] += 1
            self.cached_calls += cached

    def merge(self, other: "TokenLedger") -> None:
        """Books every call ``other`` booked, with the totals recording them here one by one
        would give (a construction run's charges, booked when the run commits)."""
        with self._lock:
            for mine, theirs in ((self.by_phase, other.by_phase),
                                 (self.by_decision, other.by_decision),
                                 (self.by_purpose, other.by_purpose), (self.calls, other.calls),
                                 (self.malformed, other.malformed)):
                for key, value in theirs.items():
                    mine[key] += value
            for phase, reasons in other.failed.items():
                self.failed[phase].update(reasons)
            self.cached_calls += other.cached_calls

    def total(self, phase: str | None = None) -> Usage:
        """Summed usage of ``phase``, or of all phases when ``phase`` is None."""
        with self._lock:
            if phase is not None:
                return self.by_phase.get(phase, Usage())
            out = Usage()
            for u in self.by_phase.values():
                out += u
            return out

    def summary(self) -> dict[str, Any]:
        """JSON-ready totals per phase (with ``total``; reasoning tokens left out where the
        server did not report them), call counts, cached calls, the malformed replies per phase
        and the failed requests per phase and reason."""
        with self._lock:
            return {"by_phase": {k: {f: x for f, x in dataclasses.asdict(v).items()
                                     if x is not None} | {"total": v.total}
                                 for k, v in self.by_phase.items()},
                    "calls": dict(self.calls), "cached_calls": self.cached_calls,
                    "malformed_replies": {k: v for k, v in self.malformed.items() if v},
                    "failed_requests": {k: dict(v) for k, v in self.failed.items() if v}}


class Backbone(abc.ABC):
    """A frozen chat model. Subclasses implement ``_chat``; accounting happens here."""
    model_name: str = "backbone"
    reasoning_effort: str | None = None   # set when the server takes one (gpt-oss on vLLM)
    # the token budget a reply cut off at its limit is asked again with, once (0: never);
    # set from ``backbone.max_tokens_on_truncation``
    max_tokens_on_truncation: int = 0
    # and the repetition penalty of that retry (1: none); ``backbone.repetition_penalty_on_truncation``
    repetition_penalty_on_truncation: float = 1.0

    def __init__(self, ledger: TokenLedger | None = None):
        self.ledger = ledger or TokenLedger()

    def note_unconstrained(self, reason: str) -> None:
        """Says once per backbone that output constraints are not enforced here (``reason``),
        so structured replies fall back to parsing alone."""
        if not getattr(self, "_said_unconstrained", False):
            self._said_unconstrained = True
            log.warning("%s: output constraints are not enforced (%s); structured replies are "
                        "parsed and validated only", self.model_name, reason)

    async def chat(self, messages: Sequence[Message], params: SamplingParams = SamplingParams(),
                   charge: Charge = Charge()) -> ChatResult:
        """Sends one chat and books its usage under ``charge``; the only public way to call a model.

        Cached responses are booked too (flagged ``cached``), so a rerun from the response cache
        reports the same token totals as the run that filled it. The reply is untrusted input:
        it leaves here cleaned and capped (``replies.sanitize``), every repair counted. A request
        that fails for good (``BackboneError``) is named by its task, template and phase.
        """
        try:
            result = await self._chat(list(messages), params)
        except BackboneError as err:
            where = ", ".join(f"{k} {v}" for k, v in (("task", charge.decision), (
                "template", charge.purpose), ("phase", charge.phase)) if v)
            if where and not getattr(err, "named_request", False):   # once, if shared
                err.named_request = True
                err.args = (f"{err.args[0] if err.args else err} ({where})",) + err.args[1:]
            raise
        result = replies.sanitize(result, params.max_tokens)
        (charge.ledger or self.ledger).record(charge, result.usage, result.cached,
                                              malformed=bool(result.malformed),
                                              failed=result.failed)
        return result

    def sent_params(self, params: SamplingParams) -> SamplingParams:
        """``params`` as this backend sends them (the response cache keys on it): the same,
        except where a backend leaves the output constraint out."""
        return params

    @abc.abstractmethod
    async def _chat(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        """The backend's call: messages in, ``ChatResult`` out, no accounting."""
        ...

    def chat_sync(self, messages, params: SamplingParams = SamplingParams(),
                  charge: Charge = Charge()) -> ChatResult:
        """``chat`` for synchronous callers (see ``run_sync``)."""
        return run_sync(self.chat(messages, params, charge))

    async def aclose(self) -> None:
        """Releases connections."""


def run_sync(coro):
    """Runs a coroutine from synchronous code, also when a loop is already running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box = {}

    def target():
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as err:  # re-raised in the caller's thread
            box["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
