"""The method of the paper: the agents and CounterMem's three modules.

  agents.py          ReAct and Reflexion over a backbone and a world-model checker (§4.1)
  counterfactual.py  Modules I–II: propose local edits to a failed action (Module I, §3.2),
                     verify them from the same state and admit the improvements (Module II, §3.3)
  locality.py        whether a proposed edit is local, Module I's contract (§3.2)
  memory_use.py      Module III, retrieval and the selector at decision time (§3.4)
  condition_text.py  the normal form of a record's condition text (§3.3)
  conditions/        a record's condition as typed clauses: parse, print, derive, check (§3.3)
  bounded_diff.py    token diffs at a bounded cost, for edits a model wrote (§3.2, §3.4)
  text_embedding.py  the hashed text embedding shared by memory, retrieval and selector
  reverify.py        stale records checked again under the current checker: kept or retired
  memory/            the store Module II admits into: records, admission, retention, persistence
                     (§3.3, App. B)
  retrieval/         candidate retrieval and its condition checkers (§3.4, App. B.2)
  selector/          the DQN selector: features, network, training, checkpoints (§3.4, App. C)
  prompting/         the prompts and their parsers (App. E)

Imports only runtime/, backbones/ and itself: never the protocol, domains, phases or binaries.
"""
