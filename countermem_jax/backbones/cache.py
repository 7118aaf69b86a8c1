"""Opt-in on-disk response cache: re-running an experiment with the same seeds makes no LLM call.

Key = sha256 of (model, messages, sampling params). One JSON file per key, written to a temporary
file and renamed, so concurrent runs sharing a cache never see a partial entry (two writers of
the same key write the same content; the last rename wins). A cached result keeps the usage of
the original call, so token totals of a re-run match the first run; the ledger counts it as cached.
"""
import dataclasses
import hashlib
import json
import os
import pathlib

from countermem_jax.backbones.base import Backbone, ChatResult, SamplingParams, Usage


def cache_key(model: str, messages, params: SamplingParams) -> str:
    payload = json.dumps({"model": model, "messages": messages, "params": params.to_json()},
                         sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class CachedBackbone(Backbone):
    def __init__(self, inner: Backbone, directory: str | os.PathLike):
        super().__init__(inner.ledger)
        self.inner = inner
        self.model_name = inner.model_name
        self.reasoning_effort = inner.reasoning_effort
        self.directory = pathlib.Path(directory)
        self.hits = self.misses = 0

    def _path(self, key: str) -> pathlib.Path:
        return self.directory / key[:2] / f"{key}.json"

    async def _chat(self, messages, params):
        path = self._path(cache_key(self.model_name, messages, params))
        if path.exists():
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
                self.hits += 1
                return ChatResult(obj["text"], obj["reasoning"], Usage(**obj["usage"]),
                                  obj["model"], cached=True, server="cache")
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
        await self.inner.aclose()
