"""Prompting: the prompt templates of paper Appendix D.8 (``prompts``), the parsers that enforce
their output contracts (``parsers``) and the log of contract violations (``failures``).
"""
