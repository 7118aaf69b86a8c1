"""Builds a backbone from a config (``config.backbone``, its fields in docs/backbones.md), so
binaries stay short.
"""
import os

from countermem_jax.backbones.base import Backbone, TokenLedger
from countermem_jax.backbones import served_urls
from countermem_jax.backbones.cache import CachedBackbone


def make_backbone(cfg, ledger: TokenLedger | None = None) -> Backbone:
    """The backbone ``cfg`` describes, wrapped in the response cache when ``cache_dir`` is set.

    ``ledger`` collects the token accounting of every call (a fresh one when None). Backends are
    imported lazily, so a run on an HTTP server never loads llama.cpp and vice versa. A bad
    kind or a missing API-key variable is a ``ValueError`` with the fix in its message.
    """
    kind = cfg.kind
    retry_budget = int(cfg.get("max_tokens_on_truncation") or 0)   # 0: twice the call's
    if kind == "llama_cpp":
        from countermem_jax.backbones.llama_cpp_backbone import LlamaCppBackbone
        model_path = cfg.get("model_path") or None
        if model_path is None and cfg.get("cpu_model"):  # one of the pinned CPU models
            from countermem_jax.backbones import gguf
            model_path = gguf.default_model_path(cfg.cpu_model)
        backbone = LlamaCppBackbone(model_path, n_ctx=cfg.get("n_ctx", 4096),
                                    n_threads=cfg.get("n_threads") or None, ledger=ledger,
                                    max_tokens_on_truncation=retry_budget)
    elif kind == "openai":
        from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
        key_env = cfg.get("api_key_env") or ""
        if key_env and not os.environ.get(key_env):
            raise ValueError(f"backbone.api_key_env names {key_env}, which is not set: export "
                             f"{key_env}=<your API key> (keys are never read from files)")
        served = served_urls.read(cfg.base_urls)   # a URL file: also what the replicas hold
        watch = served_urls.UrlFileWatch(served) if served.path is not None else None
        backbone = OpenAICompatibleBackbone(
            served.urls, cfg.model,
            max_concurrency=served_urls.in_flight_limit(cfg.get("max_concurrency", 64), served),
            timeout_s=cfg.get("timeout_s", 600.0), max_attempts=cfg.get("max_attempts", 6),
            reasoning_effort=cfg.get("reasoning_effort") or None, ledger=ledger,
            api_key=os.environ[key_env] if key_env else "EMPTY",
            constraints=bool(cfg.get("constraints", True)), max_tokens_on_truncation=retry_budget,
            url_watch=watch, max_model_len=cfg.get("max_model_len") or None)
    else:
        raise ValueError(f"unknown backbone kind {kind!r}; expected 'llama_cpp' or 'openai' "
                         "(tests build ScriptedBackbone directly)")
    if cfg.get("cache_dir"):
        backbone = CachedBackbone(backbone, cfg.cache_dir)
        backbone.max_tokens_on_truncation = retry_budget
    backbone.repetition_penalty_on_truncation = float(
        cfg.get("repetition_penalty_on_truncation") or 1.0)
    return backbone
