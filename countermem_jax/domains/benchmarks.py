"""The registered benchmarks: the twelve settings of Appendix D.1 and the extras, each a loader
over the layout that ``python -m countermem_jax.data fetch <name>`` produces under
``$COUNTERMEM_DATA`` (or ``config.data.data_dir``)."""
import dataclasses
import pathlib

from countermem_jax.domains import families
from countermem_jax.domains.registry import Benchmark, MissingData, register
from countermem_jax.paths import data_root


def _need(path, benchmark: str, what: str = "") -> pathlib.Path:
    """``path`` if it exists, else MissingData naming the command that gets it."""
    path = pathlib.Path(path)
    if not path.exists():
        raise MissingData(
            f"{benchmark}: {what or 'data'} not found at {path}; get it with "
            f"`python -m countermem_jax.data fetch {benchmark}` (then set COUNTERMEM_DATA as it "
            "prints), or see `python -m countermem_jax.data list`")
    return path


def _root(cfg, default: str) -> pathlib.Path:
    return pathlib.Path(cfg.get("data_dir") or data_root() / default)


def _with_unit(tasks, unit: str):
    """Tasks labelled with the setting's decision unit where the loader uses a narrower label."""
    return [t if t.decision_unit == unit else dataclasses.replace(t, decision_unit=unit)
            for t in tasks]


def _db_ids(cfg):
    return set(cfg.db_ids) if cfg.get("db_ids") else None


# --- Text-to-SQL -------------------------------------------------------------------------------

def _spider_tasks(cfg):
    from evaluators.sql import load_spider
    root = _need(_root(cfg, "spider"), "spider", "Spider (dev.json, tables.json, database/)")
    return load_spider(root, cfg.get("split", "dev"), db_ids=_db_ids(cfg))


def _bird_tasks(cfg):
    from evaluators.sql import load_bird
    questions = _need(cfg.get("bird_json") or data_root() / "bird_minidev/mini_dev_sqlite.json",
                      "bird", "BIRD mini-dev questions")
    if not cfg.get("bird_db_root"):
        raise MissingData("bird: the dev databases are not in the data registry's archives; "
                          "`python -m countermem_jax.data fetch bird` says how to get them, then "
                          "pass --config.data.bird_db_root=/path/to/dev_databases")
    return load_bird(questions, _need(cfg.bird_db_root, "bird", "BIRD dev_databases"),
                     db_ids=_db_ids(cfg))


def _sql_evaluator(default_timeout):
    def make(cfg):
        from evaluators.sql import SQLEvaluator
        return SQLEvaluator(timeout_s=cfg.get("check_timeout_s", default_timeout))
    return make


# --- SAT and SMT -------------------------------------------------------------------------------

def _satlib_tasks(cfg):
    from evaluators.sat import load_satlib
    root = _need(_root(cfg, "satlib"), "satlib", "SATLIB (manifest.jsonl and .cnf files)")
    families_ = tuple(cfg.get("sat_families") or ()) or None
    return load_satlib(root, families_, max_conflicts=cfg.get("max_conflicts", 200_000))


def _sat_encoding_tasks(cfg):
    from evaluators.sat import encoding_tasks
    root = _root(cfg, "satlib")
    return encoding_tasks(root if (root / "flat30-60").is_dir() else None,
                          cfg.get("generated_per_family", 10))


def _smtlib_tasks(cfg):
    from evaluators.smt import load_smtlib
    root = _need(_root(cfg, "smtlib"), "smtlib", "SMT-LIB (manifest.jsonl and .smt2 files)")
    tasks = load_smtlib(root, tuple(cfg.get("smt_logics") or ()) or None,
                        max_timeout_ms=cfg.get("smt_max_timeout_ms", 10_000))
    rlimit = cfg.get("smt_max_rlimit", 0)
    return [dataclasses.replace(t, reference=dataclasses.replace(t.reference, max_rlimit=rlimit))
            for t in tasks] if rlimit else tasks


def _smt_encoding_tasks(cfg):
    from evaluators.smt import encoding_tasks
    return encoding_tasks(cfg.get("generated_per_family", 20))


def _sat_strategy_evaluator(cfg):
    from evaluators.sat import SATStrategyEvaluator
    return SATStrategyEvaluator(timeout_s=cfg.get("check_timeout_s", 10.0))


def _sat_encoding_evaluator(cfg):
    from evaluators.sat import SATEncodingEvaluator
    return SATEncodingEvaluator(timeout_s=cfg.get("check_timeout_s", 10.0))


def _smt_solver_evaluator(cfg):
    from evaluators.smt import SMTSolverEvaluator
    return SMTSolverEvaluator()


def _smt_encoding_evaluator(cfg):
    from evaluators.smt import SMTEncodingEvaluator
    return SMTEncodingEvaluator()


# --- Coding ------------------------------------------------------------------------------------

def _repo_evaluator(cfg):
    from evaluators.coding.checker import RepoTestEvaluator
    return RepoTestEvaluator()


def _quixbugs_tasks(cfg):
    from evaluators.coding.loaders import load_quixbugs
    return load_quixbugs(_need(_root(cfg, "quixbugs"), "quixbugs", "QuixBugs"))


def _swebench_tasks(cfg):
    from evaluators.coding.loaders import load_swebench
    instances = _need(cfg.get("swebench_json") or
                      data_root() / "swebench_verified/swe_verified_15min1h_2files_instances.json",
                      "swebench", "SWE-bench Verified instances")
    if not cfg.get("swebench_checkouts"):
        raise MissingData("swebench: needs one prepared checkout per instance; "
                          "`python -m countermem_jax.data fetch swebench` prints how to build them, "
                          "then pass --config.data.swebench_checkouts=DIR")
    return load_swebench(instances, _need(cfg.swebench_checkouts, "swebench", "checkouts"))


def _bugsinpy_tasks(cfg):
    from evaluators.coding.loaders import load_bugsinpy
    root = _need(cfg.get("bugsinpy_root") or data_root() / "bugsinpy", "bugsinpy",
                 "BugsInPy (projects/<p>/bugs/<n>/bug.info)")
    if not cfg.get("bugsinpy_checkouts"):
        raise MissingData("bugsinpy: needs one checkout per bug made with BugsInPy's "
                          "bugsinpy-checkout; `python -m countermem_jax.data fetch bugsinpy` "
                          "prints how, then pass --config.data.bugsinpy_checkouts=DIR")
    return load_bugsinpy(root, _need(cfg.bugsinpy_checkouts, "bugsinpy", "checkouts"))


# --- Math (Lean 4) -----------------------------------------------------------------------------

def _lean_evaluator(cfg):
    from evaluators.formal.checkers import LeanEvaluator
    return LeanEvaluator()


def _lean_jsonl(name: str, default: str, unit: str):
    def tasks(cfg):
        from evaluators.formal.loaders import load_lean_jsonl
        path = _need(cfg.get("data_dir") or data_root() / default, name, f"{name} JSONL")
        return _with_unit(load_lean_jsonl(path, name, cfg.get("lean_split") or None,
                                          cfg.get("lean_project", "")), unit)
    return tasks


def _amber_tasks(cfg):
    from evaluators.formal.amber import load_amber
    path = _need(cfg.get("data_dir") or data_root() / "amber/amber.jsonl", "amber",
                 "AMBER tasks (amber.jsonl)")
    return load_amber(path, cfg.get("lean_project", ""))


def _amber_evaluator(cfg):
    from evaluators.formal.amber import AmberEvaluator
    return AmberEvaluator()


# --- Formal verification -----------------------------------------------------------------------

def _dafny_evaluator(cfg):
    from evaluators.formal.checkers import DafnyEvaluator
    return DafnyEvaluator(legacy=cfg.get("dafny_legacy", False))


def _verus_evaluator(cfg):
    from evaluators.formal.checkers import VerusEvaluator
    return VerusEvaluator()


def _dafnybench_tasks(cfg):
    from evaluators.formal.loaders import load_dafnybench
    return load_dafnybench(_need(_root(cfg, "dafnybench/DafnyBench/dataset"), "dafnybench",
                                 "DafnyBench dataset"))


def _vericoding(language: str):
    def tasks(cfg):
        from evaluators.formal.loaders import load_vericoding
        root = _need(_root(cfg, "vericoding/benchmarks"), f"vericoding_{language}",
                     "Vericoding benchmarks")
        return load_vericoding(root, language, tuple(cfg.get("vericoding_sources") or ()) or None)
    return tasks


_LEAN_CPU = "tasks load; checking needs Lean 4 + Mathlib (third_party/README.md)"
_SANDBOX_CPU = "runs here (bubblewrap sandbox) once checkouts exist"

for _spec in (
    Benchmark("minif2f", "miniF2F", "Math", "Lean kernel", "pass rate", "tactic / proof step",
              _lean_jsonl("minif2f", "minif2f/deepseek_prover_v1.5/minif2f.jsonl",
                          "tactic / proof step"), _lean_evaluator, families.LEAN, "minif2f",
              _LEAN_CPU),
    Benchmark("proofnet", "ProofNet", "Math", "Lean kernel", "pass rate", "proof continuation",
              _lean_jsonl("proofnet", "proofnet/proofnet.jsonl", "proof continuation"),
              _lean_evaluator, families.LEAN, "proofnet", _LEAN_CPU),
    Benchmark("amber", "AMBER", "Math", "Lean-based construction-verification checker",
              "pass rate", "tactic / lemma choice", _amber_tasks, _amber_evaluator,
              families.AMBER, "amber", _LEAN_CPU),
    Benchmark("swebench", "SWE-bench Verified", "Coding", "repository tests", "resolved rate",
              "edit / patch", _swebench_tasks, _repo_evaluator, families.CODING, "swebench",
              _SANDBOX_CPU),
    Benchmark("bugsinpy", "BugsInPy", "Coding", "regression tests", "repair rate",
              "localized edit", _bugsinpy_tasks, _repo_evaluator, families.CODING, "bugsinpy",
              _SANDBOX_CPU),
    Benchmark("dafnybench", "DafnyBench", "Formal", "Dafny verifier", "verification",
              "invariant / annotation", _dafnybench_tasks, _dafny_evaluator, families.DAFNY,
              "dafnybench", "tasks load; Dafny 2.3 (legacy, labelled) checks here, Dafny 4 for "
              "paper numbers"),
    Benchmark("vericoding_dafny", "Vericoding-Dafny", "Formal", "Dafny verifier",
              "verified synthesis", "code step", _vericoding("dafny"), _dafny_evaluator,
              families.VERICODING_DAFNY, "vericoding", "tasks load; checking needs Dafny 4"),
    Benchmark("vericoding_verus", "Vericoding-Verus", "Formal", "Verus verifier",
              "verified synthesis", "proof / code step", _vericoding("verus"), _verus_evaluator,
              families.VERUS, "vericoding", "tasks load; checking needs Verus"),
    Benchmark("spider", "Spider", "Text-to-SQL", "SQL engine", "exec. accuracy",
              "join / predicate", _spider_tasks, _sql_evaluator(10.0), families.SQL, "spider",
              "everything (the quickstart)"),
    Benchmark("bird", "BIRD", "Text-to-SQL", "SQL engine", "exec. accuracy", "schema / join",
              _bird_tasks, _sql_evaluator(30.0), families.SQL, "bird",
              "everything, once the dev databases are downloaded"),
    Benchmark("smtlib", "SMT-LIB / SMT-COMP", "SMT", "SMT solver (z3, cvc5)", "solved rate",
              "encoding / solver action", _smtlib_tasks, _smt_solver_evaluator,
              families.SMT_SOLVER, "smtlib", "everything"),
    Benchmark("satlib", "SAT Competition / SATLIB", "SAT", "SAT solver (python-sat)",
              "solved rate", "branching / encoding", _satlib_tasks, _sat_strategy_evaluator,
              families.SAT_STRATEGY, "satlib", "everything"),
    # Extras: settings this implementation adds; not among the paper's twelve.
    Benchmark("quixbugs", "QuixBugs (extra)", "Coding", "sandboxed tests", "repair rate",
              "localized edit", _quixbugs_tasks, _repo_evaluator, families.CODING, "quixbugs",
              "everything", extra=True),
    Benchmark("sat_encoding", "SAT encodings (extra)", "SAT", "SAT solver + decoded-model check",
              "constraints satisfied", "encoding", _sat_encoding_tasks, _sat_encoding_evaluator,
              families.SAT_ENCODING, "satlib", "everything", extra=True),
    Benchmark("smt_encoding", "SMT encodings (extra)", "SMT", "z3 + model re-check",
              "constraints satisfied", "encoding", _smt_encoding_tasks, _smt_encoding_evaluator,
              families.SMT_ENCODING, "", "everything (generated, no data)", extra=True),
):
    register(_spec)
