"""Domains as plugins (paper §3.1, Appendix D.1): one module per domain family (``sql``, ``sat``,
``smt``, ``coding``, ``formal``), each defining its ``Domain`` (action format and parsing, Module
I's rule edits, condition hint) and the loaders of its benchmarks; ``registry`` maps a benchmark
name to them. ``load_benchmark(cfg.data)`` is what the phases call."""
from countermem_jax.domains.base import Benchmark, Domain, MissingData
from countermem_jax.domains.coding import CODING
from countermem_jax.domains.formal import AMBER, DAFNY, LEAN, VERICODING_DAFNY, VERUS
from countermem_jax.domains.registry import BENCHMARKS, get, paper_settings
from countermem_jax.domains.sat import SAT_ENCODING, SAT_STRATEGY
from countermem_jax.domains.smt import SMT_ENCODING, SMT_SOLVER
from countermem_jax.domains.sql import SQL, data_error as _sql_data_error
from evaluators.coding import loaders as _coding
from evaluators.formal import amber as _amber, loaders as _formal
from evaluators.sat import loaders as _sat
from evaluators.smt import loaders as _smt

# Missing or malformed benchmark files and data settings naming what no file holds: the user's
# input, each message naming the file or field; raised before any result is written.
DATA_ERRORS = (MissingData, _sql_data_error(), _formal.DataError, _amber.DataError, _sat.DataError,
               _smt.DataError, _coding.DataError)

__all__ = ["AMBER", "BENCHMARKS", "Benchmark", "CODING", "DAFNY", "DATA_ERRORS", "Domain", "LEAN",
           "MissingData",
           "SAT_ENCODING", "SAT_STRATEGY", "SMT_ENCODING", "SMT_SOLVER", "SQL", "VERICODING_DAFNY",
           "VERUS", "get", "load_benchmark", "paper_settings"]


def load_benchmark(data_cfg):
    """(tasks, evaluator, domain) for ``data_cfg.benchmark``; an unknown name lists the registered
    ones."""
    benchmark = get(data_cfg.benchmark)
    tasks, evaluator = benchmark.load(data_cfg)
    return tasks, evaluator, benchmark.domain
