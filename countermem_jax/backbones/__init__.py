"""LLM backbones behind one async chat interface: what talks to a model (paper §4.1 backbones)."""
from countermem_jax.backbones.base import (Backbone, ChatResult, Message, SamplingParams, Usage,
                                           run_sync)

__all__ = ["Backbone", "ChatResult", "Message", "SamplingParams", "Usage", "run_sync"]
