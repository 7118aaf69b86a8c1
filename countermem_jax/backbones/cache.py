"""Opt-in on-disk response cache: re-running an experiment with the same seeds makes no LLM call.

Key = sha256 of (model, messages, sampling params). One JSON file per key, written to a temporary
file and renamed, so concurrent runs sharing a cache never see a partial entry (two writers of
the same key write the same content; the last rename wins). A cached result keeps the usage of
the original call, so token totals of a re-run match the first run; the ledger counts it as cached.

Single-flight: a request identical to one already in flight (in any thread or event loop of the
process) waits for that call instead of making its own, and gets its reply as a cache hit, exactly
as it would had it come after (so a concurrent run's ledger equals the sequential run's). A failed
call raises in every waiter and is not cached; if the leading call is cancelled, a waiter retries.
"""
import asyncio
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import pathlib
import threading

from countermem_jax.backbones.base import Backbone, ChatResult, SamplingParams, Usage


def cache_key(model: str, messages, params: SamplingParams) -> str:
    """sha256 hex of the canonical JSON of (model, messages, sampling params).

    Everything that can change a reply is in the key and nothing else: the server URL, the
    phase and the charge are not, so one cached reply serves any run that asks the same thing.
    """
    payload = json.dumps({"model": model, "messages": messages, "params": params.to_json()},
                         sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class CachedBackbone(Backbone):
    """Wraps a backbone with the on-disk response cache and in-process single-flight.

    Shares the inner backbone's ledger, model name and reasoning effort, so callers cannot tell
    it apart except by ``ChatResult.cached``. ``hits`` / ``misses`` count lookups of this
    process (for the speed reports).
    """
    def __init__(self, inner: Backbone, directory: str | os.PathLike):
        super().__init__(inner.ledger)
        self.inner = inner
        self.model_name = inner.model_name
        self.reasoning_effort = inner.reasoning_effort
        self.directory = pathlib.Path(directory)
        self.hits = self.misses = 0
        self._in_flight: dict[str, concurrent.futures.Future] = {}
        self._in_flight_lock = threading.Lock()

    def _path(self, key: str) -> pathlib.Path:
        """``<dir>/<first two hex digits>/<key>.json``: fan-out keeps folders small."""
        return self.directory / key[:2] / f"{key}.json"

    async def _chat(self, messages, params):
        """Single-flight front of ``_lookup_or_call``: one call per key in flight, waiters share its reply.

        The leader publishes its outcome through a ``concurrent.futures.Future`` (usable from any
        event loop or thread); ``_CANCELLED`` tells waiters to try again themselves.
        """
        key = cache_key(self.model_name, messages, params)
        while True:
            with self._in_flight_lock:
                leader = self._in_flight.get(key)
                if leader is None:
                    shared = self._in_flight[key] = concurrent.futures.Future()
                    shared.set_running_or_notify_cancel()  # a cancelled waiter cannot cancel it
            if leader is None:
                break
            result = await asyncio.wrap_future(leader)
            if result is not _CANCELLED:
                self.hits += 1
                return _as_hit(result)
        try:
            result = await self._lookup_or_call(key, messages, params)
        except BaseException as err:
            self._forget(key)
            if isinstance(err, asyncio.CancelledError):
                shared.set_result(_CANCELLED)
            else:
                shared.set_exception(err)
            raise
        self._forget(key)
        shared.set_result(result)
        return result

    def _forget(self, key: str) -> None:
        """Drops ``key`` from the in-flight table (before its outcome is published)."""
        with self._in_flight_lock:
            del self._in_flight[key]

    async def _lookup_or_call(self, key, messages, params) -> ChatResult:
        """A cached reply if a valid entry exists, else the inner backbone's reply, stored
        atomically.
        """
        path = self._path(key)
        if path.exists():
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
                self.hits += 1
                return _as_hit(ChatResult(obj["text"], obj["reasoning"], Usage(**obj["usage"]),
                                          obj["model"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                path.unlink(missing_ok=True)  # a damaged entry is refetched, never trusted
        self.misses += 1
        result = await self.inner._chat(messages, params)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{id(result)}.tmp")
        tmp.write_text(json.dumps({"text": result.text, "reasoning": result.reasoning,
                                   "usage": dataclasses.asdict(result.usage),
                                   "model": result.model}), encoding="utf-8")
        os.replace(tmp, path)
        return result

    async def aclose(self):
        """Closes the inner backbone's connections."""
        await self.inner.aclose()


_CANCELLED = object()  # the leading call was cancelled: its waiters make the call themselves


def _as_hit(result: ChatResult) -> ChatResult:
    """A reply as the cache returns it: the original text and usage, marked cached."""
    return ChatResult(result.text, result.reasoning, result.usage, result.model, cached=True,
                      server="cache")
