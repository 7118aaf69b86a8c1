"""Probes of the CPU model that may shape a choice, on the tuning pool only
(``countermem_jax/protocol/pools.py`` refuses a report-pool database before anything loads):
``record_yield`` (construction yield: how many counterfactual checks become records) and
``sql_operators`` (how often Module I's SQL operators reach a fix). Each run gets a row in
``docs/ledger.md``."""
