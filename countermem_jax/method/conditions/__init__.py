"""A record's condition c (paper §3.3, §3.4, Appendix B.2): its text, its clauses, its checks.

  text.py           the normal form of a condition's text (the model's "none" is no condition)
  grammar.py        the clauses, their one parser (``parse``) and one printer (``str``)
  derivation.py     ``derive``: the condition a verified edit supports, through a domain's
                    ``ActionNames`` hook (``domains/base.py``, ``domains/sql_names.py``)
  applicability.py  ``check``: does a condition hold for a task (``TaskFacts``); ``never_holds``
  checkers.py       the eligibility test of Eq. 7: rules, the LLM judge, the unknown policy
"""
from countermem_jax.method.conditions.applicability import (FALLBACK_POLICIES, TaskFacts, check,
                                                            draft_uses, mentions, never_holds)
from countermem_jax.method.conditions.derivation import (ActionNames, Derivation, EditNames,
                                                         derive)
from countermem_jax.method.conditions.grammar import (Clause, Compare, Condition, DraftHas,
                                                      DraftLacks, EditTouches, Environment,
                                                      FeedbackContains, FreeText, Has, OneOf,
                                                      RequestContains, listable, parse)

__all__ = ["ActionNames", "Clause", "Compare", "Condition", "Derivation", "DraftHas",
           "DraftLacks", "EditNames", "EditTouches", "Environment", "FALLBACK_POLICIES",
           "FeedbackContains", "FreeText", "Has", "OneOf", "RequestContains", "TaskFacts",
           "check", "derive", "draft_uses", "listable", "mentions", "never_holds", "parse"]
