"""In-process CPU backbone on llama.cpp (``llama-cpp-python``, the ``cpu`` extra)."""
import asyncio
import json
import os
import re
import threading

from countermem_jax.backbones.base import Backbone, ChatResult, SamplingParams, Usage


_GBNF_ESCAPES = {"\\": "\\\\", '"': '\\"', "\r": "\\r", "\n": "\\n"}


def schema_grammar(schema: dict) -> str:
    """GBNF for a JSON schema: llama-cpp-python's ``SchemaConverter`` (what
    ``response_format={"type": "json_object", "schema": ...}`` uses), with literals escaped as
    GBNF needs. The library escapes ``"`` but not ``\\``, so a constant holding a double quote
    (JSON ``\\"``, e.g. an edit unit ``WHERE name = "Ben Jones"``) closes its GBNF literal early;
    llama.cpp then refuses the grammar and the sampler crashes the process (a segfault)."""
    from llama_cpp import llama_grammar

    class Converter(llama_grammar.SchemaConverter):
        def _format_literal(self, literal):
            return '"' + re.sub(r'[\\"\r\n]', lambda m: _GBNF_ESCAPES[m.group(0)], literal) + '"'

    converter = Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    converter.visit(converter.resolve_refs(json.loads(json.dumps(schema)), "schema"), "")
    return converter.format_grammar()


class LlamaCppBackbone(Backbone):
    """A GGUF model run in this process; ``model_path`` None means the pinned CPU default.

    ``n_threads`` defaults to all cores. Generations are serialised by a lock, so concurrent
    decisions queue here rather than corrupting the shared context; ``_chat`` runs generation in
    a worker thread so the event loop keeps serving other tasks meanwhile.
    """
    def __init__(self, model_path: str | os.PathLike | None = None, *, n_ctx: int = 4096,
                 n_threads: int | None = None, ledger=None, verbose: bool = False,
                 max_tokens_on_truncation: int = 0):
        super().__init__(ledger)
        self.max_tokens_on_truncation = max_tokens_on_truncation
        try:
            import llama_cpp
        except ImportError:
            raise ImportError("llama-cpp-python is missing: pip install -e '.[cpu]' "
                              "(--find-links ../shared/wheels skips the build)") from None
        if model_path is None:
            from countermem_jax.backbones import gguf
            model_path = gguf.default_model_path()
        self.model_path = str(model_path)
        self.model_name = os.path.basename(self.model_path)
        self._llm = llama_cpp.Llama(model_path=self.model_path, n_ctx=n_ctx,
                                    n_threads=n_threads or os.cpu_count(), verbose=verbose,
                                    seed=0)
        self._lock = threading.Lock()  # one generation at a time: the context is not shareable

    def _generate(self, messages, params: SamplingParams) -> ChatResult:
        """One blocking chat completion; usage and finish reason as llama.cpp reports them."""
        constraint = params.constraint
        extra = {}
        if constraint is not None:
            import llama_cpp
            grammar = (schema_grammar(constraint.schema) if constraint.json_schema
                       else constraint.grammar)
            extra["grammar"] = llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
        with self._lock:
            out = self._llm.create_chat_completion(
                messages=messages, temperature=params.temperature, top_p=params.top_p,
                max_tokens=params.max_tokens, seed=params.seed,
                repeat_penalty=params.repetition_penalty,
                stop=list(params.stop) or None, **extra)
        usage = out.get("usage") or {}
        choice = out["choices"][0]
        return ChatResult(choice["message"].get("content") or "", "",
                          Usage(int(usage.get("prompt_tokens", 0)),
                                int(usage.get("completion_tokens", 0)), 0, "server"),
                          self.model_name, server="in-process",
                          finish_reason=choice.get("finish_reason") or "",
                          constrained=constraint is not None)

    async def _chat(self, messages, params):
        """``_generate`` off the event loop."""
        return await asyncio.to_thread(self._generate, messages, params)
