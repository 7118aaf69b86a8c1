"""Builders for small, real test objects."""
import dataclasses
import importlib.util
import itertools
import pathlib
import sqlite3

from countermem_jax.method.memory import CheckOutcome, Evidence, MemoryRecord, Provenance
from countermem_jax.method.memory.record import make_record_id, normalize_condition


CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "configs"


def config_module(name: str):
    """``configs/<name>`` loaded as the binaries load it (a file, not a package module)."""
    from countermem_jax.protocol import config_files
    return config_files.load_module(CONFIGS / name)


def default_config():
    """``configs/default.py``: every field with the paper's value."""
    return config_module("default.py").get_config()


def paper_config(arg: str = "spider,react,gptoss"):
    """``configs/paper.py:ARG``."""
    return config_module("paper.py").get_config(arg)


def cpu_config(agent: str = "react"):
    """``configs/spider_react_cpu.py``: the CPU schedule (with ``agent``)."""
    return config_module("spider_react_cpu.py").get_config(agent)


def paper(section: str, **changes):
    """The default config's typed method section ``section`` (``context.method_config``:
    store, construction, dqn, retrieval, use, judge), with ``changes``: a test takes the paper's
    values from the config, as the phases do."""
    from countermem_jax.phases import context
    method = context.method_config(default_config())
    return dataclasses.replace(getattr(method, section), **changes)


def agent_config(**changes):
    """The default config's ``AgentConfig`` (``configs/default.py``'s ``agent``) with
    ``changes``."""
    from countermem_jax.method.agents import AgentConfig
    return AgentConfig(**{**default_config().agent.to_dict(), **changes})


def make_record(source_task_id="t1", situation="numeric threshold omits its boundary value",
                original="SELECT name FROM people WHERE age > 18",
                improved="SELECT name FROM people WHERE age >= 18",
                before=0.0, after=1.0, completed=True, condition="bound == inclusive",
                reuse=0.0, uses=0, helpful=0, harmful=0, domain="sql"):
    condition = normalize_condition(condition)
    return MemoryRecord(
        record_id=make_record_id(source_task_id, situation, original, improved, condition),
        source_task_id=source_task_id, situation=situation, original_action=original,
        improved_action=improved,
        evidence=Evidence(CheckOutcome(before, before >= 1.0, completed, "rows differ"),
                          CheckOutcome(after, after >= 1.0, completed, "rows match")),
        condition=condition,
        provenance=Provenance(domain=domain, benchmark="spider", backbone_model="fake",
                              evaluator="sqlite-exec", evaluator_version="1",
                              created_at="2026-11-22T00:00:00Z"),
        reuse_utility=reuse, uses=uses, helpful_uses=helpful, harmful_uses=harmful)


def pigeonhole(n):
    """PHP(n+1, n): unsatisfiable and exponentially hard for resolution."""
    var = lambda p, h: p * n + h + 1
    clauses = [tuple(var(p, h) for h in range(n)) for p in range(n + 1)]
    clauses += [(-var(a, h), -var(b, h)) for h in range(n)
                for a, b in itertools.combinations(range(n + 1), 2)]
    return (n + 1) * n, tuple(clauses)


PEOPLE = [("Ann", 25), ("Bob", 30), ("Cid", 35), ("Dee", 40), ("Eve", 45), ("Fay", 50), ("Gus", 55)]


def people_benchmark(directory, questions):
    """(tasks, evaluator, domain) over a real SQLite ``people`` table (``PEOPLE``): one SQL task
    per {task id: (question, gold condition on age, e.g. ">= 30")}."""
    from countermem_jax.domains import SQL
    from evaluators.base import Task
    from evaluators.sql import SQLEvaluator
    from evaluators.sql.checker import SQLReference
    from evaluators.sql.features import question_features
    db = directory / "people.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE people (name TEXT, age INTEGER)")
    conn.executemany("INSERT INTO people VALUES (?, ?)", PEOPLE)
    conn.commit()
    conn.close()
    tasks = [Task(tid, "sql", "people", q, "Database: people\nSchema:\nCREATE TABLE people (name "
                  "TEXT, age INTEGER);", "join / predicate",
                  reference=SQLReference(f"SELECT name FROM people WHERE age {gold}", str(db),
                                         "spider"),
                  features={"db_id": "people", **question_features(q)}, environment="people")
             for tid, (q, gold) in questions.items()]
    return tasks, SQLEvaluator(), SQL


def config_without_model(path):
    """The config a config file's ``get_config()`` gives, with a model path that does not exist:
    what a binary sees when a test runs it with ``--config.backbone.model_path=/nonexistent.gguf``
    (to record a workdir's fingerprints without loading a model)."""
    path = pathlib.Path(path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cfg = module.get_config()
    cfg.backbone.model_path = "/nonexistent.gguf"
    return cfg
