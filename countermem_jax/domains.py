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
    lambda task, action: operators.sql_edits(action, getattr(task.reference, "db_path", None)))

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
    raise ValueError(f"unknown benchmark {name!r}; expected spider, bird, satlib, sat_encoding, "
                     "smtlib or smt_encoding")
