"""A deterministic SQL benchmark and the scripted model that answers it over HTTP (the
pipeline benchmark's; ``benchmarks/speed/pipeline.py``).

Tasks: Spider questions when the data is present (``n`` of the shared copy's dev split, drawn
by a seeded shuffle as the protocol's split draws are, so that databases mix within a split
instead of coming one after another in file order), else questions over a generated SQLite table
of people. The scripted model knows every task's gold query and makes one deterministic mistake
on about half of them (it appends `` LIMIT 0``, so the checker sees no rows); it proposes the
edit that removes it, distils a record whose free-text condition names the task's database,
judges a condition to hold exactly when it names the task's database (as a careful judge of
"the question is about the concert_singer database" would), and applies a retrieved record by
removing the mistake. Every reply is a function of the request alone, so any number of requests
in flight, in any order, get the replies one request at a time would get.
"""
import hashlib
import json
import pathlib
import re
import sqlite3

import numpy as np

from evaluators.base import Task

MISTAKE = " LIMIT 0"


def task_key(task: Task) -> str:
    """What identifies a task inside a prompt: its context's first line (the database) and its
    question, as the method's task header shows them (``prompts.task_fields``)."""
    return f"{task.context.split(chr(10), 1)[0]}\n{task.prompt.strip()}"


_HEADER = re.compile(r"^([^\n]*).*?\n\nQuestion: (.*?)\n\n", re.S)


def _prompt_key(text: str) -> str:
    """``task_key`` of the task a prompt's header shows, or "" when it has none."""
    m = _HEADER.match(text)
    return f"{m.group(1)}\n{m.group(2).strip()}" if m else ""


def _flawed(key: str) -> bool:
    return hashlib.sha256(key.encode()).digest()[0] % 2 == 0


def responder_config(tasks) -> dict:
    """The scripted model's knowledge (``make_responder``'s config): every task's gold query,
    and the database each question is about."""
    return {"gold": {task_key(t): t.reference.gold_sql.strip().rstrip(";") for t in tasks},
            "databases": {t.prompt.strip(): t.features["db_id"] for t in tasks}}


def _code_block(sql: str) -> str:
    return f"```sql\n{sql}\n```"


_DATABASE = re.compile(r"^Database: (\S+)", re.M)
_CONDITION_DATABASE = re.compile(r"<condition>.*?the (\S+) database.*?</condition>", re.S)
_JUDGED_TASK = re.compile(r"<task>(.*?)</task>", re.S)


def _judge(text: str, databases: dict) -> str:
    """YES exactly when the condition names the database of the task shown with it (the judge
    is shown the task's question: the scripted model knows which database each is about)."""
    named = _CONDITION_DATABASE.search(text)
    task = _JUDGED_TASK.search(text).group(1).strip()
    shown = _DATABASE.search(task)
    database = shown.group(1) if shown else databases.get(task)
    return "YES" if named and named.group(1) == database else "NO"


def make_responder(config: dict):
    """The scripted model: request (OpenAI chat body) -> reply text."""
    gold: dict = config["gold"]
    databases: dict = config.get("databases", {})

    def reply(request: dict) -> str:
        text = request["messages"][-1]["content"]
        # a request with an output constraint (a JSON schema) gets the same answer as JSON
        as_json = "response_format" in request
        if text.startswith("You decide whether a stored correction applies"):
            verdict = _judge(text, databases)
            return json.dumps({"verdict": verdict}) if as_json else verdict
        if "Propose up to" in text and "Failed action:" in text:
            if as_json:
                return json.dumps({"edits": [{"find": MISTAKE.strip(), "replace": ""}]})
            return f"EDIT 1\nFIND: {MISTAKE.strip()}\nREPLACE:\n"
        if "Original action (failed):" in text:
            database = _DATABASE.search(text).group(1)
            situation = "a row limit of zero was appended to a query whose answer has rows"
            condition = f"the question is about the {database} database"
            if as_json:
                return json.dumps({"situation": situation, "condition": condition})
            return f"SITUATION: {situation}\nCONDITION: {condition}"
        if "A stored correction from an earlier task" in text:
            draft = re.search(r"Your draft action:\n```\n(.*?)\n```", text, re.S).group(1)
            return _code_block(draft.replace(MISTAKE, ""))
        key = _prompt_key(text)
        if key in gold:  # a draft (first or later attempt): the same mistake every time
            sql = gold[key]
            return _code_block(sql + MISTAKE if _flawed(key) else sql)
        raise ValueError(f"the scripted SQL model has no reply for: {text[:120]!r}")
    return reply


def spider_tasks(n: int, data_dir: str = "", seed: int = 0):
    """``n`` Spider tasks (a seeded shuffle of the dev split, ``seed``) with the SQL checker and
    domain, or None without the data."""
    from countermem_jax import domains  # the package's loaders (data/fetch.py paths)
    from countermem_jax.protocol import config_files
    cfg = config_files.load("configs/default.py").data
    cfg.update(benchmark="spider", data_dir=data_dir)
    try:
        tasks, evaluator, domain = domains.load_benchmark(cfg)
    except (FileNotFoundError, OSError, ValueError):
        return None
    if len(tasks) < n:
        return None
    order = np.random.default_rng(seed).permutation(len(tasks))
    return [tasks[i] for i in order[:n]], evaluator, domain


def people_tasks(n: int, directory: pathlib.Path):
    """``n`` threshold questions over a generated table of people (no data needed)."""
    from countermem_jax.domains import SQL
    from evaluators.sql import SQLEvaluator
    from evaluators.sql.checker import SQLReference
    from evaluators.sql.features import question_features
    db = directory / "people.sqlite"
    if not db.exists():
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE people (name TEXT, age INTEGER)")
        conn.executemany("INSERT INTO people VALUES (?, ?)",
                         [(f"p{i}", 18 + (i * 7) % 60) for i in range(200)])
        conn.commit()
        conn.close()
    tasks = []
    for i in range(n):
        age, op = 20 + i % 50, (">=", ">", "<=", "<")[i % 4]
        question = f"Question {i}: names of people whose age is {op} {age}."
        tasks.append(Task(f"people/{i}", "sql", "spider", question,
                          "Database: people\nSchema:\n"
                          "CREATE TABLE people (name TEXT, age INTEGER);",
                          "join / predicate",
                          reference=SQLReference(f"SELECT name FROM people WHERE age {op} {age}",
                                                 str(db), "spider"),
                          features={"db_id": "people", **question_features(question)},
                          environment="people"))
    return tasks, SQLEvaluator(), SQL
