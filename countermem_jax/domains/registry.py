"""Benchmark registry: one entry per benchmark name, mapping it to its loaders (in its domain
family's module) and to what the paper says about it (Appendix D.1: domain, checker, score,
decision unit). Adding a benchmark is one loader function in its domain module plus one entry in
``_ENTRIES``; the entries are in the paper's order, extras last.
"""
from countermem_jax.domains import coding, formal, sat, smt, sql
from countermem_jax.domains.base import Benchmark

# The six domain columns of Appendix D.1; the summaries average benchmarks within each (§4.4).
PAPER_DOMAINS = ("Math", "Coding", "Formal", "Text-to-SQL", "SMT", "SAT")
FOUR_DOMAINS = ("Math", "Coding", "Text-to-SQL", "SAT")   # the main table's domains (§4.1)

# What runs without a GPU: shared by the settings whose checker is an external toolchain.
_LEAN_CPU = "tasks load; checking needs Lean 4 + Mathlib (third_party/README.md)"
_SANDBOX_CPU = "runs here (bubblewrap sandbox) once checkouts exist"

_ENTRIES = (
    # Math: Lean 4 settings. miniF2F and ProofNet share the prover JSONL loader and differ in
    # their decision unit; AMBER's solutions also carry a construction (``formal.amber_edits``).
    Benchmark("minif2f", "miniF2F", "Math", "Lean kernel", "pass rate", "tactic / proof step",
              formal.lean_jsonl_tasks("minif2f", "minif2f/deepseek_prover_v1.5/minif2f.jsonl",
                                      "tactic / proof step"), formal.lean_evaluator, formal.LEAN,
              "minif2f", _LEAN_CPU),
    Benchmark("proofnet", "ProofNet", "Math", "Lean kernel", "pass rate", "proof continuation",
              formal.lean_jsonl_tasks("proofnet", "proofnet/proofnet.jsonl",
                                      "proof continuation"),
              formal.lean_evaluator, formal.LEAN, "proofnet", _LEAN_CPU),
    Benchmark("amber", "AMBER", "Math", "Lean-based construction-verification checker",
              "pass rate", "tactic / lemma choice", formal.amber_tasks, formal.amber_evaluator,
              formal.AMBER, "amber", _LEAN_CPU),
    # Coding: both run the task's tests on a prepared checkout in a bubblewrap sandbox.
    Benchmark("swebench", "SWE-bench Verified", "Coding", "repository tests", "resolved rate",
              "edit / patch", coding.swebench_tasks, coding.repo_evaluator, coding.CODING,
              "swebench", _SANDBOX_CPU),
    Benchmark("bugsinpy", "BugsInPy", "Coding", "regression tests", "repair rate",
              "localized edit", coding.bugsinpy_tasks, coding.repo_evaluator, coding.CODING,
              "bugsinpy", _SANDBOX_CPU),
    # Formal: DafnyBench restores removed annotations; Vericoding synthesizes a verified body.
    Benchmark("dafnybench", "DafnyBench", "Formal", "Dafny verifier", "verification",
              "invariant / annotation", formal.dafnybench_tasks, formal.dafny_evaluator,
              formal.DAFNY, "dafnybench", "tasks load; Dafny 2.3 (legacy, labelled) checks here, "
              "Dafny 4 for paper numbers"),
    Benchmark("vericoding_dafny", "Vericoding-Dafny", "Formal", "Dafny verifier",
              "verified synthesis", "code step", formal.vericoding_tasks("dafny"),
              formal.dafny_evaluator, formal.VERICODING_DAFNY, "vericoding",
              "tasks load; checking needs Dafny 4"),
    Benchmark("vericoding_verus", "Vericoding-Verus", "Formal", "Verus verifier",
              "verified synthesis", "proof / code step", formal.vericoding_tasks("verus"),
              formal.verus_evaluator, formal.VERUS, "vericoding",
              "tasks load; checking needs Verus"),
    # Text-to-SQL: the per-query timeout is larger for BIRD, whose databases are far bigger.
    Benchmark("spider", "Spider", "Text-to-SQL", "SQL engine", "exec. accuracy",
              "join / predicate", sql.spider_tasks, sql.sql_evaluator(10.0), sql.SQL, "spider",
              "everything (the quickstart)"),
    Benchmark("bird", "BIRD", "Text-to-SQL", "SQL engine", "exec. accuracy", "schema / join",
              sql.bird_tasks, sql.sql_evaluator(30.0), sql.SQL, "bird",
              "everything, once the dev databases are downloaded"),
    # SMT and SAT: the action is a solver configuration, checked by running the solver.
    Benchmark("smtlib", "SMT-LIB / SMT-COMP", "SMT", "SMT solver (z3, cvc5)", "solved rate",
              "encoding / solver action", smt.smtlib_tasks, smt.smt_solver_evaluator,
              smt.SMT_SOLVER, "smtlib", "everything"),
    Benchmark("satlib", "SAT Competition / SATLIB", "SAT", "SAT solver (python-sat)",
              "solved rate", "branching / encoding", sat.satlib_tasks, sat.sat_strategy_evaluator,
              sat.SAT_STRATEGY, "satlib", "everything"),
    # Extras: settings this implementation adds; not among the paper's twelve. They are loadable
    # by name like the others but excluded from ``paper_settings`` and the paper's summaries.
    Benchmark("quixbugs", "QuixBugs (extra)", "Coding", "sandboxed tests", "repair rate",
              "localized edit", coding.quixbugs_tasks, coding.repo_evaluator, coding.CODING,
              "quixbugs", "everything", extra=True),
    Benchmark("sat_encoding", "SAT encodings (extra)", "SAT", "SAT solver + decoded-model check",
              "constraints satisfied", "encoding", sat.sat_encoding_tasks,
              sat.sat_encoding_evaluator, sat.SAT_ENCODING, "satlib", "everything", extra=True),
    Benchmark("smt_encoding", "SMT encodings (extra)", "SMT", "z3 + model re-check",
              "constraints satisfied", "encoding", smt.smt_encoding_tasks,
              smt.smt_encoding_evaluator, smt.SMT_ENCODING, "", "everything (generated, no data)",
              extra=True),
)


def _checked(entries) -> dict[str, Benchmark]:
    """The entries by name; a name registered twice or a paper setting outside the paper's six
    domains is a ValueError."""
    out: dict[str, Benchmark] = {}
    for spec in entries:
        if spec.name in out:
            raise ValueError(f"benchmark {spec.name!r} is registered twice")
        if not spec.extra and spec.paper_domain not in PAPER_DOMAINS:
            raise ValueError(f"{spec.name}: paper domain {spec.paper_domain!r} not in "
                             f"{PAPER_DOMAINS}")
        out[spec.name] = spec
    return out


# Checked once at import, so a mistyped entry fails every command instead of one run.
BENCHMARKS: dict[str, Benchmark] = _checked(_ENTRIES)


def get(name: str) -> Benchmark:
    """The registered benchmark, or ValueError listing every registered name."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}; registered: "
                         f"{', '.join(sorted(BENCHMARKS))}") from None


def paper_settings() -> list[Benchmark]:
    """The twelve settings of Appendix D.1, in the paper's order: the rows of the benchmark
    breakdown and what the twelve-benchmark summaries average over (§4.4)."""
    return [b for b in BENCHMARKS.values() if not b.extra]
