"""LLM backbones behind one async chat interface, prompts and their parser contracts."""
from countermem_jax.backbones.base import (Backbone, ChatResult, Message, SamplingParams, Usage,
                                           run_sync)

__all__ = ["Backbone", "ChatResult", "Message", "SamplingParams", "Usage", "run_sync"]
