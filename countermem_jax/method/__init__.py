"""The method of the paper: the agents and CounterMem's three modules (docs/method.md).

Imports only runtime/, backbones/ and itself: never the protocol, domains, phases or binaries.
"""
