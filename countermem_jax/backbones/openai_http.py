"""OpenAI-compatible chat client for vLLM (or llama.cpp's server), over aiohttp."""
import asyncio
import collections
import dataclasses
import email.utils
import logging
import json
import re
import threading
import time
from typing import Sequence

import aiohttp
import tenacity

from countermem_jax.backbones import replies, tokens
from countermem_jax.backbones.base import (Backbone, BackboneError, ChatResult, Message,
                                          SamplingParams, Usage)

__all__ = ["BackboneError", "OpenAICompatibleBackbone", "RequestRejected"]

log = logging.getLogger(__name__)

# Request fields that carry an output constraint (``_constraint_fields``).
_CONSTRAINT_KEYS = ("response_format", "structured_outputs")
# What a server's refusal of a constraint says besides the field's name (vLLM's structured
# outputs backends, hosted APIs): read only on a 400 that is not a context-length error.
_CONSTRAINT_WORDS = ("json_schema", "json schema", "structured output", "guided", "grammar")
# The longest ``Retry-After`` honoured; a longer one (a daily quota) is waited this long.
RETRY_AFTER_MAX_S = 300.0
# Usage counts past this are absurd (ten times gpt-oss's 131,072-token context) unless the
# backbone is told its server's ``max_model_len`` (then ten times that).
USAGE_BOUND = 10 * 131_072

# vLLM's context-length refusals (HTTP 400) across releases, and llama.cpp's error type:
# "This model's maximum context length is N tokens. However, you requested ..." (older vLLM),
# "'max_tokens' or 'max_completion_tokens' is too large: B. This model's maximum context length
# is N tokens and your request has A input tokens ...", "You passed A input tokens and requested
# B output tokens. However, the model's context length is only N tokens ..." (vllm/renderers/
# params.py), "The decoder prompt (length A) is longer than the maximum model length of N"
# (vllm/v1/engine); llama.cpp: ``"type": "exceed_context_size_error"``, "request (A tokens)
# exceeds the available context size (N tokens)" (older: "input (A tokens) is larger than the
# max context size (N tokens)"); OpenAI: ``"code": "context_length_exceeded"``.
_CONTEXT_MESSAGES = re.compile(
    r"maximum context length is \d+ tokens|the model's context length is only \d+ tokens"
    r"|is longer than the maximum model length of \d+"
    r"|exceeds (?:the available )?context size \(\d+ tokens\)"
    r"|is larger than the max context size \(\d+ tokens\)", re.IGNORECASE)
_CONTEXT_CODES = ("context_length_exceeded", "exceed_context_size_error")


def context_length_error(status: int, text: str) -> bool:
    """Whether an answer is a server's refusal of a prompt that cannot fit its context: HTTP
    400 whose JSON error carries a known code or type, or one of vLLM's or llama.cpp's messages
    (``_CONTEXT_MESSAGES``), not any text that happens to say "context"."""
    if status != 400:
        return False
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if not isinstance(payload, dict):
        return False
    error = payload.get("error") if isinstance(payload.get("error"), dict) else payload
    if any(error.get(key) in _CONTEXT_CODES for key in ("code", "type")):
        return True
    message = error.get("message")
    return isinstance(message, str) and _CONTEXT_MESSAGES.search(message) is not None


def _validation_refusal(status: int, text: str, body: dict) -> bool:
    """Whether an answer is a request-schema validation error on the constraint field: what
    ``llama_cpp.server`` sends (HTTP 500, FastAPI/pydantic's "validation error" with the field's
    location, ``'response_format', 'type'``; a plain FastAPI app sends 422) to a
    ``response_format`` of type ``json_schema``, which it does not take."""
    if status not in (422, 500) or "response_format" not in body:
        return False
    low = text.lower()
    return "response_format" in low and (status == 422 or "validation error" in low)


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date), capped
    at ``RETRY_AFTER_MAX_S``; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


class RequestRejected(BackboneError):
    """The server refused the request itself (a 4xx other than 408/429: an unknown model name, a
    bad key): asking again, here or from a retried run, gets the same answer."""


class _ConstraintRejected(Exception):
    """The server refused a request because of its output-constraint field (HTTP 400)."""


class _ContextLength(Exception):
    """The server refused a request whose prompt and ``max_tokens`` exceed its context."""


class _Retryable(Exception):
    """A failure worth another attempt (429, 408, 5xx, timeout, dropped connection, bad JSON).

    Internal to ``_chat``: tenacity retries on it, and when attempts run out it becomes a
    ``BackboneError`` naming the last server and reason.
    """
    def __init__(self, server: str, reason: str, not_json: bool = False):
        super().__init__(f"{server}: {reason}")
        self.server, self.reason, self.not_json = server, reason, not_json


class _SharedLimit:
    """A first-come-first-served counting semaphore shared by every event loop of the process
    (asyncio's is bound to one loop); a cancelled waiter never keeps a slot."""

    def __init__(self, slots: int):
        self._lock, self._free = threading.Lock(), slots
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    async def __aenter__(self):
        """Takes a slot, queueing behind earlier waiters from any loop."""
        with self._lock:
            while self._waiters and self._waiters[0].cancelled():
                self._waiters.popleft()  # cancelled waiters are skipped, not removed, at once
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted just before the cancellation: pass the slot on
            raise

    async def __aexit__(self, *exc):
        """Returns the slot (to the first waiter, if any)."""
        self._release()

    def _release(self) -> None:
        """Hands the slot to the first waiter (woken on its own loop), or frees it."""
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                try:
                    waiter.get_loop().call_soon_threadsafe(self._grant, waiter)
                    return
                except RuntimeError:  # its loop is closed: nobody waits there any more
                    continue
            self._free += 1

    def _grant(self, waiter: asyncio.Future) -> None:
        """On the waiter's own loop: wakes it, or passes the slot on if it was cancelled."""
        if waiter.cancelled():
            self._release()
        else:
            waiter.set_result(None)


@dataclasses.dataclass
class _Replica:
    """Load and health of one base URL: requests in flight, total requests, the monotonic time
    until which it is avoided after a failure (5 s after a connection error, 2 s after a 5xx),
    and the end of the window its last ``Retry-After`` asked for.
    """
    url: str
    in_flight: int = 0
    failed_until: float = 0.0
    requests: int = 0
    retry_until: float = 0.0


class OpenAICompatibleBackbone(Backbone):
    """Client for one model served by one or more OpenAI-compatible replicas (docs/backbones.md
    lists the policies).

    ``base_urls`` are the replicas' ``.../v1`` roots; ``model`` the served name sent with every
    request; ``max_concurrency`` bounds requests in flight across all replicas and event loops;
    ``timeout_s`` is the total per request; ``max_attempts`` counts the first try; backoff is
    full-jitter exponential from ``backoff_initial_s`` up to ``backoff_max_s``.
    ``peak_in_flight`` records the highest concurrency reached (reported by the speed checks).
    ``url_watch`` (a ``served_urls.UrlFileWatch``) replaces the replicas when the URL file
    changes; ``max_model_len`` (the server's, when known) bounds the usage counts believed.
    """
    def __init__(self, base_urls: Sequence[str] | str, model: str, *, api_key: str = "EMPTY",
                 max_concurrency: int = 64, timeout_s: float = 600.0, max_attempts: int = 6,
                 backoff_initial_s: float = 0.5, backoff_max_s: float = 30.0,
                 reasoning_effort: str | None = None, ledger=None, constraints: bool = True,
                 max_tokens_on_truncation: int = 0, url_watch=None,
                 max_model_len: int | None = None):
        super().__init__(ledger)
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise ValueError("at least one base URL is needed")
        self.replicas = [_Replica(u.rstrip("/")) for u in urls]
        self.url_watch = url_watch
        self._watched = url_watch.served if url_watch is not None else None
        self.usage_bound = 10 * max_model_len if max_model_len else USAGE_BOUND
        self.model_name = model
        self.api_key = api_key
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff = (backoff_initial_s, backoff_max_s)
        self.reasoning_effort = reasoning_effort
        # False when the config turned them off; ``refused``: the constraints (by name) a
        # server refused, never sent again
        self.constraints = constraints
        self.refused: set[str] = set()
        self.max_tokens_on_truncation = max_tokens_on_truncation
        self._limit = _SharedLimit(max_concurrency)
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self._sessions_lock = threading.Lock()
        self.peak_in_flight = 0

    def _client(self) -> aiohttp.ClientSession:
        """The running loop's session (sessions cannot cross loops); the limit is shared."""
        loop = asyncio.get_running_loop()
        with self._sessions_lock:
            for other in [other for other in self._sessions if other.is_closed()]:
                del self._sessions[other]  # a loop that ended without aclose
            session = self._sessions.get(loop)
            if session is None or session.closed:
                session = self._sessions[loop] = aiohttp.ClientSession(
                    timeout=aiohttp.ClientTimeout(total=self.timeout_s,
                                                  sock_connect=min(10.0, self.timeout_s)),
                    connector=aiohttp.TCPConnector(limit=self.max_concurrency),
                    headers={"Authorization": f"Bearer {self.api_key}"}, trust_env=False)
        return session

    def _pick(self, avoid: str | None) -> _Replica:
        """The least-loaded replica, preferring healthy ones and never ``avoid`` (the one that just failed)
        unless it is the only one. Ties go to the replica that has served fewer requests.
        """
        self._follow_url_file()
        now = time.monotonic()
        healthy = [r for r in self.replicas if max(r.failed_until, r.retry_until) <= now
                   and r.url != avoid]
        pool = healthy or [r for r in self.replicas if r.url != avoid] or self.replicas
        return min(pool, key=lambda r: (r.retry_until > now, r.in_flight, r.requests))

    def _follow_url_file(self) -> None:
        """Takes the URL file's replicas when it changed: those still listed keep their load
        and health, new ones start fresh."""
        if self.url_watch is None:
            return
        served = self.url_watch.current()
        if served is self._watched:
            return
        with self._sessions_lock:
            if served is self._watched:
                return
            known = {r.url: r for r in self.replicas}
            self.replicas = [known.get(u.rstrip("/")) or _Replica(u.rstrip("/"))
                             for u in served.urls]
            self._watched = served

    def _retry_wait(self) -> float:
        """Seconds until the first replica's ``Retry-After`` window ends (0 if any is out of
        one): what the next attempt waits at least."""
        now = time.monotonic()
        return max(0.0, min(r.retry_until for r in self.replicas) - now)

    def _sends_constraint(self, constraint) -> bool:
        """Whether ``constraint`` goes to the server: constraints are on and the server has not
        refused this one (by name)."""
        return (constraint is not None and self.constraints
                and constraint.name not in self.refused)

    def sent_params(self, params: SamplingParams) -> SamplingParams:
        """``params`` as sent: without the constraint where it is not sent (config, refusal)."""
        if params.constraint is not None and not self._sends_constraint(params.constraint):
            return dataclasses.replace(params, constraint=None)
        return params

    def _body(self, messages: list[Message], params: SamplingParams) -> dict:
        """The ``/chat/completions`` request body; optional fields are sent only when set, since some
        servers reject keys they do not know (``reasoning_effort`` in particular).
        """
        body = {"model": self.model_name, "messages": messages, "temperature": params.temperature,
                "top_p": params.top_p, "max_tokens": params.max_tokens}
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.repetition_penalty != 1.0:   # vLLM's sampling parameter of that name
            body["repetition_penalty"] = params.repetition_penalty
        effort = params.reasoning_effort or self.reasoning_effort
        if effort:
            body["reasoning_effort"] = effort
        if params.constraint is not None:
            if self._sends_constraint(params.constraint):
                body.update(_constraint_fields(params.constraint))
            elif not self.constraints:
                self.note_unconstrained("backbone.constraints is off")
        return body

    async def _chat(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        """One chat through the concurrency limit, with retries on another replica; raises
        ``BackboneError``. A refused constraint is asked again without it (and never sent
        again); a prompt past the server's context is an empty, failed reply.
        """
        body = self._body(messages, params)
        try:
            try:
                result = await self._send(body, messages)
            except _ConstraintRejected as err:
                name = params.constraint.name
                if name not in self.refused:
                    self.refused.add(name)
                    log.warning("%s: the output constraint %r is not enforced (the server "
                                "refused it: %s); that template's replies are parsed and "
                                "validated only from now on", self.model_name, name, err)
                body = self._body(messages, params)
                result = await self._send(body, messages)
        except _ContextLength as err:
            log.warning("%s: a prompt does not fit the server's context (%s); the request "
                        "counts as failed (context_length) and the run goes on",
                        self.model_name, err.args[0])
            return ChatResult("", "", Usage(0, 0, 0, "server"), self.model_name,
                              server=err.args[1], failed="context_length")
        sent = any(key in body for key in _CONSTRAINT_KEYS)
        return dataclasses.replace(result, constrained=sent) if sent else result

    async def _send(self, body: dict, messages) -> ChatResult:
        """``body`` through the concurrency limit, with retries on another replica."""
        client = self._client()
        # The replica of the previous attempt: ``_pick`` avoids it, so a retry goes elsewhere.
        last = {"server": None}
        backoff = tenacity.wait_random_exponential(multiplier=self.backoff[0],
                                                   max=self.backoff[1])
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            # full jitter, but never inside every replica's Retry-After window
            wait=lambda state: max(backoff(state), self._retry_wait()),
            retry=tenacity.retry_if_exception_type(_Retryable), reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    async with self._limit:  # pick after the wait, when the load is known
                        replica = self._pick(last["server"])
                        last["server"] = replica.url
                        return await self._post(client, replica, body, messages)
        except _Retryable as err:
            if err.not_json:
                # the server answers, but not in JSON, whenever asked this: an empty reply,
                # counted, so one request cannot end the run
                log.warning("%s answered %d times with a body that is not JSON: %s; an empty "
                            "reply is used", err.server, self.max_attempts, err.reason)
                return self._malformed({}, "not_json", err.server, messages)
            raise BackboneError(f"{err.server} failed after {self.max_attempts} attempts: "
                                f"{err.reason}") from None
        raise AssertionError("unreachable")

    async def _post(self, client, replica: _Replica, body: dict, messages) -> ChatResult:
        """One HTTP attempt against ``replica``; classifies the failure as retryable or final.

        A 4xx other than 408/429 is final at once: the request itself is wrong and would fail again.
        """
        replica.in_flight += 1
        replica.requests += 1
        self.peak_in_flight = max(self.peak_in_flight, sum(r.in_flight for r in self.replicas))
        try:
            try:
                async with client.post(f"{replica.url}/chat/completions", json=body) as response:
                    status = response.status
                    raw = await _read_body(response.content, replies.MAX_BODY_BYTES + 1)
            except (asyncio.TimeoutError, aiohttp.ClientError) as err:
                replica.failed_until = time.monotonic() + 5.0
                raise _Retryable(replica.url, f"{type(err).__name__}: {err or 'connection failed'}")
            if len(raw) > replies.MAX_BODY_BYTES:
                if status >= 400:
                    raise _Retryable(replica.url, f"HTTP {status} with a body over "
                                     f"{replies.MAX_BODY_BYTES} bytes")
                # a reply no token budget allows: counted as malformed and cut, never parsed
                return self._malformed("", "over_length", replica.url, messages, "length")
            text, bad_bytes = replies.decode_body(raw)
            if _validation_refusal(status, text, body):   # deterministic: never retried
                raise _ConstraintRejected(text[:200])
            if status == 429 or status >= 500 or status == 408:
                if status >= 500:
                    replica.failed_until = time.monotonic() + 2.0
                wait = (retry_after_s(response.headers.get("Retry-After"))
                        if status in (429, 503) else None)
                if wait:
                    replica.retry_until = time.monotonic() + wait
                raise _Retryable(replica.url, f"HTTP {status}: {text[:200]}")
            if context_length_error(status, text):   # before the constraint: never its refusal
                raise _ContextLength(text[:300], replica.url)
            if status == 400 and any(key in body for key in _CONSTRAINT_KEYS) and any(
                    word in text.lower() for word in _CONSTRAINT_KEYS + _CONSTRAINT_WORDS):
                raise _ConstraintRejected(text[:200])
            if status >= 400:
                raise RequestRejected(f"{replica.url} rejected the request (HTTP {status}, "
                                      f"not retried): {text[:500]}")
            try:
                payload = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as err:   # or nested past the stack
                raise _Retryable(replica.url, f"malformed response ({type(err).__name__}): "
                                 f"{text[:200]!r}", not_json=True)
            choices = payload.get("choices") if isinstance(payload, dict) else None
            if not isinstance(choices, list) or not choices:
                # a well-formed HTTP 200 without an answer: an empty reply, counted, not raised
                return self._malformed(payload, "empty_choices", replica.url, messages)
            result = self._result(payload, choices[0], messages, replica.url)
            if bad_bytes:
                result = dataclasses.replace(result, malformed=",".join(
                    bad_bytes + [r for r in result.malformed.split(",") if r]))
            return result
        finally:
            replica.in_flight -= 1

    def _malformed(self, payload, reason: str, server: str, messages,
                   finish: str = "") -> ChatResult:
        """The empty reply a response without a usable answer stands for, ``reason`` named
        (usage from the server when it gave one, else the prompt counted locally)."""
        usage, bad = self._usage(payload if isinstance(payload, dict) else {}, messages, "", "")
        return ChatResult("", "", usage, self.model_name, server=server, finish_reason=finish,
                          malformed=",".join([reason] + ([bad] if bad else [])))

    def _result(self, payload: dict, choice, messages, server: str) -> ChatResult:
        """``ChatResult`` from a response's first choice; usage from the server, else counted
        with the gpt-oss tokenizer. A choice, message or field of the wrong JSON type gives
        an empty field, named in ``malformed`` (the text is cleaned and capped in
        ``Backbone.chat``).

        A locally counted usage is marked ``source="tokenizer"`` so reports can tell estimates from
        what the server billed.
        """
        reasons = []
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            message = {}
            reasons.append("no_message")
        text, found = replies.clean_text(message.get("content"))
        reasoning, found_r = replies.clean_text(message.get("reasoning_content")
                                                or message.get("reasoning"))
        reasons += [r for r in found + found_r if r not in reasons]
        finish = choice.get("finish_reason") if isinstance(choice, dict) else ""
        model = payload.get("model")
        usage, bad = self._usage(payload, messages, text, reasoning)
        if bad:
            reasons.append(bad)
        return ChatResult(text, reasoning, usage,
                          model if isinstance(model, str) else self.model_name, server=server,
                          finish_reason=finish if isinstance(finish, str) else "",
                          malformed=",".join(reasons))

    def _usage(self, payload: dict, messages, text: str, reasoning: str
               ) -> tuple[Usage, str]:
        """The usage the server reported if it passes ``usage_defect``, else the gpt-oss
        tokenizer's count; and "usage_invalid" when the server's was refused (logged)."""
        usage = payload.get("usage")
        if isinstance(usage, dict) and usage.get("prompt_tokens") is not None:
            defect = usage_defect(usage, self.usage_bound)
            if defect is None:
                details = usage.get("completion_tokens_details") or {}
                prompt_details = usage.get("prompt_tokens_details") or {}
                return Usage(usage["prompt_tokens"], usage["completion_tokens"],
                             details.get("reasoning_tokens"), "server",
                             prompt_details.get("cached_tokens") or 0), ""
            # said once per backbone (a broken server says it on every reply); each is counted
            (log.debug if getattr(self, "_said_usage", False) else log.warning)(
                "%s: the server's usage is not booked (%s); the tokenizer's count is, and the "
                "reply is counted as malformed (usage_invalid)", self.model_name, defect)
            self._said_usage = True
        local = Usage(tokens.count_messages(messages),
                      tokens.count_tokens(text) + tokens.count_tokens(reasoning),
                      tokens.count_tokens(reasoning), "tokenizer")
        return local, ("usage_invalid" if isinstance(usage, dict)
                       and usage.get("prompt_tokens") is not None else "")

    def chat_sync(self, messages, params=SamplingParams(), charge=None):
        """One blocking call (its own event loop, whose session is closed afterwards)."""
        from countermem_jax.backbones.base import Charge, run_sync

        async def once():
            try:
                return await self.chat(messages, params, charge or Charge())
            finally:
                await self.aclose()
        return run_sync(once())

    async def aclose(self) -> None:
        """Closes the running loop's session only; other loops' sessions and the shared limit
        stay (a later call on this loop opens a new session)."""
        with self._sessions_lock:
            session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()


async def _read_body(stream, limit: int) -> bytes:
    """The body up to ``limit`` bytes: a body past the boundary's bound is not read further
    (nor parsed), however much the server sends."""
    chunks, size = [], 0
    while size < limit and (chunk := await stream.read(limit - size)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def usage_defect(usage: dict, bound: int) -> str | None:
    """What is wrong with a server's usage block, or None: prompt and completion tokens must be
    whole numbers in [0, ``bound``]; cached and reasoning tokens, when given, whole numbers no
    larger than the prompt's and the completion's."""
    def count(value, name: str, limit: int) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name}={value!r} is not a whole number"
        if not 0 <= value <= limit:
            return f"{name}={value} is outside [0, {limit}]"
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    checks = [count(prompt, "prompt_tokens", bound), count(completion, "completion_tokens", bound)]
    if not any(checks):
        for field, name, limit in (("prompt_tokens_details", "cached_tokens", prompt),
                                   ("completion_tokens_details", "reasoning_tokens", completion)):
            details = usage.get(field)
            if details is None:
                continue
            if not isinstance(details, dict):
                checks.append(f"{field}={details!r} is not an object")
            elif details.get(name) is not None:
                checks.append(count(details[name], name, limit))
    return "; ".join(c for c in checks if c) or None


def _constraint_fields(constraint) -> dict:
    """The request fields of an output constraint, as vLLM's structured-outputs docs give them:
    a JSON schema in the OpenAI-standard ``response_format`` (which hosted APIs take too), a
    grammar in vLLM's ``structured_outputs`` (the ``guided_*`` fields it replaced were removed
    in vLLM 0.12)."""
    if constraint.json_schema:
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": constraint.name, "schema": constraint.schema, "strict": True}}}
    return {"structured_outputs": {"grammar": constraint.grammar}}
