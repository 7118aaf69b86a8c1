"""Per-domain glue: how actions are written and parsed, which rule edits exist, which features a
condition may test, and how a benchmark's tasks and evaluator are built from a config."""
import dataclasses
from typing import Callable

from countermem_jax import operators
from countermem_jax.backbones import parsers
from countermem_jax.paths import data_root


@dataclasses.dataclass(frozen=True)
class Domain:
    name: str
    instructions: str
    condition_hint: str
    rule_edits: Callable   # (task, action) -> list[str]

    def parse_action(self, reply: str) -> str:
        return parsers.parse_action(reply, self.name)


SQL = Domain(
    "sql",
    "Write one SQLite SELECT statement that answers the question, using only tables and columns "
    "from the schema. Put it in a ```sql code block.",
    "Prefer a condition written as a rule over the question's features, e.g. 'bound == inclusive', "
    "'bound == strict', 'distinct == true', 'aggregate == count', 'ordering == desc', "
    "'db_id == <name>', or 'question contains \"<phrase>\"'.",
    lambda task, action: operators.sql_edits(action, getattr(task.reference, "db_path", None),
                                             question=task.prompt))

SAT_STRATEGY = Domain(
    "sat", "Write the solver configuration as 'key: value' lines in a ``` code block.",
    "A condition may test 'family == <name>' or 'num_vars' style features.",
    lambda task, action: operators.sat_strategy_edits(action))

SAT_ENCODING = Domain(
    "sat", "Write the DIMACS CNF with its 'c var N NAME' map in a ``` code block.",
    "A condition may test 'problem == <name>' or 'family == <name>'.",
    lambda task, action: operators.sat_encoding_edits(action))

SMT_SOLVER = Domain(
    "smt", "Write the solver action as 'key: value' lines in a ``` code block.",
    "A condition may test 'logic == <name>' or 'family == <name>'.",
    lambda task, action: operators.smt_solver_edits(action))

SMT_ENCODING = Domain(
    "smt", "Write the SMT-LIB 2 script in a ```smt2 code block.",
    "A condition may test 'problem == <name>' or 'family == <name>'.",
    lambda task, action: operators.smt_encoding_edits(action))


def _coding_edits(task, action: str) -> list[str]:
    """Python operators applied to the replacement block of a localized edit (the failing lines)."""
    from evaluators.coding import edits
    try:
        edit = edits.parse_localized(action)
    except edits.EditError:
        return []
    if edit is None:
        return []
    out = []
    for variant in operators.python_edits(edit.replacement + "\n"):
        out.append(f"FILE: {edit.path}\nLINES: {edit.start}-{edit.end}\nREPLACE:\n"
                   f"{variant.rstrip(chr(10))}")
    return out


CODING = Domain(
    "coding", "Answer with one localized edit in exactly this form:\nFILE: <path>\nLINES: "
    "<first>-<last>\nREPLACE:\n<the new lines>",
    "A condition may test 'program == <name>', 'file == <path>' or 'repo == <name>'.",
    _coding_edits)

LEAN = Domain("math", "Write only the tactic proof that follows ':= by', in a ```lean code block.",
              "A condition may test 'split == <name>'.", lambda task, action: [])

DAFNY = Domain("formal", "Write the whole program in a ```dafny code block.",
               "A condition may test 'source == <name>'.",
               lambda task, action: operators.smt_encoding_edits(action))


def load_benchmark(cfg):
    """(tasks, evaluator, domain) for ``cfg.benchmark`` ∈ spider, bird, satlib, sat_encoding,
    smtlib, smt_encoding."""
    name = cfg.benchmark
    root = cfg.get("data_dir") or None
    if name == "spider":
        from evaluators.sql import SQLEvaluator, load_spider
        tasks = load_spider(root or data_root() / "spider", cfg.get("split", "dev"),
                            db_ids=set(cfg.db_ids) if cfg.get("db_ids") else None)
        return tasks, SQLEvaluator(timeout_s=cfg.get("check_timeout_s", 10.0)), SQL
    if name == "bird":
        from evaluators.sql import SQLEvaluator, load_bird
        tasks = load_bird(cfg.bird_json, cfg.bird_db_root,
                          db_ids=set(cfg.db_ids) if cfg.get("db_ids") else None)
        return tasks, SQLEvaluator(timeout_s=cfg.get("check_timeout_s", 30.0)), SQL
    if name == "satlib":
        from evaluators.sat import SATStrategyEvaluator, load_satlib
        return (load_satlib(root or data_root() / "satlib"),
                SATStrategyEvaluator(timeout_s=cfg.get("check_timeout_s", 10.0)), SAT_STRATEGY)
    if name == "sat_encoding":
        from evaluators.sat import SATEncodingEvaluator, encoding_tasks
        return (encoding_tasks(root or data_root() / "satlib", cfg.get("generated_per_family", 10)),
                SATEncodingEvaluator(timeout_s=cfg.get("check_timeout_s", 10.0)), SAT_ENCODING)
    if name == "smtlib":
        from evaluators.smt import SMTSolverEvaluator, load_smtlib
        return load_smtlib(root or data_root() / "smtlib"), SMTSolverEvaluator(), SMT_SOLVER
    if name == "smt_encoding":
        from evaluators.smt import SMTEncodingEvaluator, encoding_tasks
        return encoding_tasks(cfg.get("generated_per_family", 20)), SMTEncodingEvaluator(), \
            SMT_ENCODING
    if name == "quixbugs":
        from evaluators.coding.checker import RepoTestEvaluator
        from evaluators.coding.loaders import load_quixbugs
        return load_quixbugs(root or data_root() / "quixbugs"), RepoTestEvaluator(), CODING
    if name == "swebench":
        from evaluators.coding.checker import RepoTestEvaluator
        from evaluators.coding.loaders import load_swebench
        return load_swebench(cfg.swebench_json, cfg.swebench_checkouts), RepoTestEvaluator(), CODING
    if name in ("minif2f", "proofnet"):
        from evaluators.formal.checkers import LeanEvaluator
        from evaluators.formal.loaders import load_lean_jsonl
        path = {"minif2f": data_root() / "minif2f/deepseek_prover_v1.5/minif2f.jsonl",
                "proofnet": data_root() / "proofnet/proofnet.jsonl"}[name]
        return (load_lean_jsonl(root or path, name, cfg.get("lean_split") or None,
                                cfg.get("lean_project", "")), LeanEvaluator(), LEAN)
    if name == "dafnybench":
        from evaluators.formal.checkers import DafnyEvaluator
        from evaluators.formal.loaders import load_dafnybench
        return (load_dafnybench(root or data_root() / "dafnybench/DafnyBench/dataset"),
                DafnyEvaluator(legacy=cfg.get("dafny_legacy", False)), DAFNY)
    raise ValueError(f"unknown benchmark {name!r}; expected spider, bird, satlib, sat_encoding, "
                     "smtlib, smt_encoding, quixbugs, swebench, minif2f, proofnet or dafnybench")
