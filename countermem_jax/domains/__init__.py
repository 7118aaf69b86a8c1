"""Domains as plugins (paper §3.1, Appendix D.1): the action formats and rule edits of each domain
kind (``families``), and the benchmark registry (``registry``, filled by ``benchmarks``) that maps
a benchmark name to its loader. ``load_benchmark(cfg.data)`` is what the phase binaries call."""
from countermem_jax.domains import benchmarks as _benchmarks  # noqa: F401  (fills the registry)
from countermem_jax.domains.base import Domain
from countermem_jax.domains.families import (AMBER, CODING, DAFNY, LEAN, SAT_ENCODING,
                                             SAT_STRATEGY, SMT_ENCODING, SMT_SOLVER, SQL,
                                             VERICODING_DAFNY, VERUS)
from countermem_jax.domains.registry import BENCHMARKS, Benchmark, MissingData, get, paper_settings

__all__ = ["AMBER", "BENCHMARKS", "Benchmark", "CODING", "DAFNY", "Domain", "LEAN", "MissingData",
           "SAT_ENCODING", "SAT_STRATEGY", "SMT_ENCODING", "SMT_SOLVER", "SQL", "VERICODING_DAFNY",
           "VERUS", "get", "load_benchmark", "paper_settings"]


def load_benchmark(cfg):
    """(tasks, evaluator, domain) for ``cfg.benchmark``; an unknown name lists the registered ones."""
    return get(cfg.benchmark).load(cfg)
