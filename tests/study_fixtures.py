"""A small real Text-to-SQL benchmark for the study tests: two SQLite databases (two
environments), questions with an inclusive bound ("at least N": the scripted draft writes a
strict ``>``, which the real checker fails and a counterfactual ``>=`` fixes) and questions with
a strict bound ("strictly above N": the draft is right), and a scripted backbone with a reply
for every prompt the studies send (CounterMem, ReasoningBank and its controls, Reflexion, the
look-alike generator)."""
import re
import sqlite3

from benchmarks.testing.scripted_backbone import ScriptedBackbone
from helpers import default_config
from countermem_jax.domains import SQL
from countermem_jax.studies.protocols import study_config  # noqa: F401  (tests import it here)
from evaluators.base import Task
from evaluators.sql import SQLEvaluator
from evaluators.sql.checker import SQLReference
from evaluators.sql.features import question_features

TABLES = {"people": ("age", "people aged", range(20, 75, 5)),
          "pets": ("weight", "pets weighing", range(2, 57, 5))}
STRATEGY = "TITLE: inclusive bounds\nDESCRIPTION: 'at least' is >=\nCONTENT: write >= for 'at least'"


def make_benchmark(root, n_per_table: int = 10, strict_every: int = 4):
    """(tasks, evaluator, domain): ``n_per_table`` questions per database, every
    ``strict_every``-th with a strict bound. Task ids: ``<table>_<k>``."""
    tasks = []
    for table, (column, phrase, values) in TABLES.items():
        db = root / f"{table}.sqlite"
        conn = sqlite3.connect(db)
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (name TEXT, {column} INTEGER)")
        conn.execute(f"DELETE FROM {table}")
        conn.executemany(f"INSERT INTO {table} VALUES (?, ?)",
                         [(f"{table[:2]}{v}", v) for v in values])
        conn.commit()
        conn.close()
        thresholds = list(values)[1:]
        for k in range(n_per_table):
            bound = thresholds[k % len(thresholds)]
            strict = k % strict_every == strict_every - 1
            words, op = ("strictly above", ">") if strict else ("at least", ">=")
            question = f"List the names of {phrase} {words} {bound} (question {k})."
            gold = f"SELECT name FROM {table} WHERE {column} {op} {bound}"
            tasks.append(Task(
                f"{table}_{k}", "sql", "spider", question,
                f"Database: {table}\nSchema:\nCREATE TABLE {table} (name TEXT, {column} INTEGER);",
                "join / predicate", reference=SQLReference(gold, str(db), "spider"),
                features={"db_id": table, **question_features(question)}, environment=table))
    return tasks, SQLEvaluator(), SQL


def _question(messages) -> tuple[str, str, str]:
    text = messages[-1]["content"]
    table = re.search(r"Database: (\w+)", text).group(1)
    column = TABLES[table][0]
    bound = re.search(r"(?:at least|strictly above) (\d+)", text).group(1)
    return table, column, bound


def _draft(messages) -> str:
    table, column, bound = _question(messages)
    return f"```sql\nSELECT name FROM {table} WHERE {column} > {bound}\n```"


def _revise(messages) -> str:
    text = messages[-1]["content"]
    draft = re.search(r"Your draft action:\n```\n(.*?)\n```", text, re.S).group(1)
    return "```sql\n" + re.sub(r" > (\d+)", r" >= \1", draft) + "\n```"


def _alternative(messages) -> str:
    m = re.search(r"(\w+) > (\d+)", messages[-1]["content"])
    return f"EDIT 1\nFIND: {m.group(1)} > {m.group(2)}\nREPLACE: {m.group(1)} >= {m.group(2)}"


def _look_alike(messages) -> str:
    text = messages[-1]["content"]
    original = re.search(r"Original task:\n(.*?)\n", text).group(1)
    return "TASK: " + original.replace("at least", "strictly above")


def scripted() -> ScriptedBackbone:
    fake = ScriptedBackbone()
    fake.model_name = "scripted-fake"
    fake.add(_draft, template="DRAFT_ACTION")
    fake.add(_alternative, template="GENERATE_LOCAL_ALTERNATIVES")
    fake.add("SITUATION: an inclusive 'at least' threshold was written as a strict comparison\n"
             "CONDITION: bound == inclusive", template="DISTIL_RECORD")
    fake.add(_revise, template="REVISE_WITH_RECORD")
    fake.add(_revise, template="REVISE_WITH_MEMORY")
    fake.add("REFLECTION: check whether the bound is inclusive", template="REFLEXION_REFLECT")
    fake.add("VERDICT: failure", template="REASONINGBANK_JUDGE")
    for name in ("REASONINGBANK_EXTRACT", "MATTS_SELF_CONTRAST", "REASONINGBANK_VERIFIED"):
        fake.add(STRATEGY, template=name)
    fake.add(_look_alike, template="LOOK_ALIKE_TASK")
    return fake


def small_config(**splits):
    """Paper defaults shrunk to seconds: 2 attempts, a 6-decision single-seed selector."""
    c = default_config()
    c.agent.max_attempts = 2
    # every question here differs only in its literal bound: no paraphrase groups to keep apart
    c.splits.update({**dict(n_build=6, n_train=2, n_validation=1, n_eval=4,
                            group_by_reference=False), **splits})
    c.selector.update(total_decisions=4, learning_starts=1, train_every=1, target_sync_every=2,
                      checkpoint_every=2, batch_size=2, seeds=(0,))
    return c

