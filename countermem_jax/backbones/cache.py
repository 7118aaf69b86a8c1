"""Opt-in on-disk response cache: re-running an experiment with the same seeds makes no LLM call."""
import asyncio
import collections
import concurrent.futures
import dataclasses
import hashlib
import itertools
import json
import os
import pathlib
import shutil
import sys
import threading

from countermem_jax.backbones.base import Backbone, ChatResult, SamplingParams, Usage


def cache_key(model: str, messages, params: SamplingParams) -> str:
    """sha256 hex of the canonical JSON of (model, messages, sampling params), the call's
    output constraint included (``SamplingParams.to_json``).

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
        self.damaged = 0  # misses whose entry was there but unreadable (refetched, rewritten)
        self.joined_in_flight = 0  # hits that waited for an identical call in flight
        self._in_flight: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()
        self._recent: collections.OrderedDict[str, ChatResult] = collections.OrderedDict()
        self._listed: dict[str, set[str]] = {}  # fan-out folder -> entry file names in it

    def _path(self, key: str) -> pathlib.Path:
        """``<dir>/<first two hex digits>/<key>.json``: fan-out keeps folders small."""
        return self.directory / key[:2] / f"{key}.json"

    async def _chat(self, messages, params):
        """Single-flight front of ``_lookup_or_call``: one call per key in flight, its outcome
        shared through a ``concurrent.futures.Future`` (any loop or thread); ``_CANCELLED``
        tells the waiters to try again themselves."""
        key = cache_key(self.model_name, messages, self.inner.sent_params(params))
        while True:
            with self._lock:
                leader = self._in_flight.get(key)
                if leader is None:
                    shared = self._in_flight[key] = concurrent.futures.Future()
                    shared.set_running_or_notify_cancel()  # a cancelled waiter cannot cancel it
            if leader is None:
                break
            result = await asyncio.wrap_future(leader)
            if result is not _CANCELLED:
                self.hits += 1
                self.joined_in_flight += 1
                return _as_hit(result)
        call = asyncio.ensure_future(self._lead(key, messages, params, shared))
        # the waiters got its exception (its leader may be gone): asyncio must not warn of it
        call.add_done_callback(lambda done: done.cancelled() or done.exception())
        return await asyncio.shield(call)  # cancelling the leader leaves the call running

    async def _lead(self, key, messages, params, shared: concurrent.futures.Future):
        """The leader's lookup or call, its outcome published to the waiters."""
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

    def _on_disk(self, folder: str) -> set[str]:
        """The entry files of fan-out ``folder``, listed on first use."""
        names = self._listed.get(folder)
        if names is None:
            try:
                names = set(os.listdir(self.directory / folder))
            except FileNotFoundError:
                names = set()
            names = self._listed.setdefault(folder, names)
        return names

    def _remember(self, key: str, result: ChatResult) -> None:
        """Keeps ``result`` among the recent replies (the oldest dropped beyond the bound)."""
        with self._lock:
            self._recent[key] = result
            self._recent.move_to_end(key)
            if len(self._recent) > RECENT_REPLIES:
                self._recent.popitem(last=False)

    def _forget(self, key: str) -> None:
        """Drops ``key`` from the in-flight table (before its outcome is published)."""
        with self._lock:
            del self._in_flight[key]

    async def _lookup_or_call(self, key, messages, params) -> ChatResult:
        """A cached reply if a valid entry exists, else the inner backbone's reply, written
        before it is returned."""
        with self._lock:
            recent = self._recent.get(key)
        if recent is not None:
            self.hits += 1
            return _as_hit(recent)
        path = self._path(key)
        try:
            if path.name not in self._on_disk(key[:2]):
                raise FileNotFoundError(path)
            result = _parse_entry(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, RecursionError) as err:  # damaged: refetched, never trusted
            self._damaged(path, err)
        else:
            self.hits += 1
            self._remember(key, result)
            return _as_hit(result)
        self.misses += 1
        result = await self.inner._chat(messages, params)
        sent = cache_key(self.model_name, messages, self.inner.sent_params(params))
        if sent != key:   # the server refused the constraint during the call: keyed as sent
            key, path = sent, self._path(sent)
        self._remember(key, result)  # a repeat is a hit from now on, written or not
        await asyncio.to_thread(_store, path, result)  # off the event loop
        self._on_disk(key[:2]).add(path.name)
        return result

    def _damaged(self, path: pathlib.Path, err: BaseException) -> None:
        """Counts an unreadable entry, says so the first time, and clears its path."""
        with self._lock:
            self.damaged += 1
            first = self.damaged == 1
        if first:
            reason = " ".join(str(err).split())[:200] or type(err).__name__
            print(f"warning: reply cache {path}: unreadable entry ({reason}); treated as a miss "
                  "and refetched (later ones are counted, not reported)", file=sys.stderr)
        _clear(path)

    async def aclose(self):
        """Closes the inner backbone's connections."""
        await self.inner.aclose()


_CANCELLED = object()  # the leading call was cancelled: its waiters make the call themselves
RECENT_REPLIES = 16384  # replies kept in memory per CachedBackbone (a few KB each)


_TEXT_FIELDS = ("text", "reasoning", "model")
_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")


def _parse_entry(data: str) -> ChatResult:
    """The reply an entry holds; ``ValueError`` (or ``RecursionError``) for anything else than
    what ``_store`` writes: UTF-8 JSON, strings for the texts, whole counts for the usage."""
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object: {type(obj).__name__}")
    for name in _TEXT_FIELDS:
        if not isinstance(obj.get(name), str):
            raise ValueError(f"field {name!r} is not a string")
    usage = obj.get("usage")
    if not isinstance(usage, dict) or set(usage) - {*_USAGE_COUNTS, "source"}:
        raise ValueError("field 'usage' is not a usage record")
    for name in _USAGE_COUNTS:
        count = usage.get(name, 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"usage {name!r} is not a token count: {count!r}")
    if not isinstance(usage.get("source", "server"), str):
        raise ValueError("usage 'source' is not a string")
    for name, kind in (("finish_reason", str), ("constrained", bool), ("malformed", str)):
        if name in obj and not isinstance(obj[name], kind):
            raise ValueError(f"field {name!r} is not a {kind.__name__}")
    return ChatResult(obj["text"], obj["reasoning"], Usage(**usage), obj["model"],
                      finish_reason=obj.get("finish_reason", ""),
                      constrained=obj.get("constrained", False),
                      malformed=obj.get("malformed") or "")


def _clear(path: pathlib.Path) -> None:
    """Removes what stands at an entry's path (a file, a link, a folder) so it can be written
    again; what cannot be removed is left for the write to report."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def _as_hit(result: ChatResult) -> ChatResult:
    """A reply as the cache returns it: the original text and usage, marked cached."""
    return dataclasses.replace(result, cached=True, server="cache")


def _write_entry(path: pathlib.Path, text: str) -> None:
    """Writes one entry atomically: a temporary file named for this process, then a rename
    (several processes writing the same key write the same content; the last rename wins)."""
    tmp = path.with_suffix(f".{os.getpid()}.{next(_TMP_NAMES)}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)   # a write a full disk cut leaves nothing behind


_TMP_NAMES = itertools.count()


def _store(path: pathlib.Path, result: ChatResult) -> None:
    """Serialises and writes one entry, creating its fan-out folder the first time (again
    if it was removed since); a request the server could not take is not kept."""
    if result.failed:
        return
    text = json.dumps({"text": result.text, "reasoning": result.reasoning,
                       "usage": dataclasses.asdict(result.usage), "model": result.model,
                       "finish_reason": result.finish_reason,
                       "constrained": result.constrained}
                      | ({"malformed": result.malformed} if result.malformed else {}))
    try:
        _write_entry(path, text)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_entry(path, text)
