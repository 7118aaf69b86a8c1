"""Prompting: the prompt templates of paper Appendix D.8 (``prompts``), the parsers that enforce
their output contracts (``parsers``) and the log of contract violations (``failures``).

This package sits between the model connection (``countermem_jax/backbones``, which it calls
through the ``Backbone`` interface) and the agents and memory modules that fill the templates.
How an action is parsed out of a reply is the domain's business (``countermem_jax/domains``);
the templates only hand the reply to it.
"""
