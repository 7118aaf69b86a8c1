"""Two small Spider-like SQLite benchmarks and a scripted OpenAI-format server for the sweep
tests (tests/test_sweep*.py).

Imported by the sweep's workers (``sweep.imports``), it registers ``sweep_people`` and
``sweep_pets``: each one table, seven questions asking for the names whose number is "at least"
(inclusive) or "strictly above" (strict) a bound. The scripted backbone always drafts the strict
comparison, so inclusive questions fail until a stored correction (``>`` -> ``>=``) is applied:
CounterMem has something to build, train on and rescue. ``ScriptedServer`` answers each prompt
template from its text over real loopback HTTP (``LocalOpenAIServer``), so every node of a test
cluster can run its own server. The file is also a run config: ``get_config(benchmark)``.
"""
import json
import pathlib
import re
import sqlite3
import time

import filelock

from benchmarks.testing.openai_server import LocalOpenAIServer
from helpers import default_config
from countermem_jax.domains.base import Benchmark
from countermem_jax.domains.registry import BENCHMARKS
from countermem_jax.domains.sql import SQL, sql_evaluator

TABLES = {"sweep_people": ("people", "age", [("Ann", 25), ("Bob", 30), ("Cid", 35), ("Dee", 40),
                                             ("Eve", 45), ("Fay", 50), ("Gus", 55)]),
          "sweep_pets": ("pets", "weight", [("Rex", 3), ("Tom", 5), ("Kit", 8), ("Max", 12),
                                            ("Bo", 20), ("Zed", 25), ("Oli", 31)])}
QUESTIONS = {"sweep_people": {"b1": 30, "b2": 50, "t1": 45, "t2": 35, "v1": 55, "e1": 40,
                              "e2": -40},
             "sweep_pets": {"b1": 5, "b2": 20, "t1": 8, "t2": 3, "v1": 25, "e1": 12, "e2": -20}}
MANIFEST = {"build": ["b1", "b2"], "train": ["t1", "t2"], "validation": ["v1"],
            "eval": ["e1", "e2"]}


def question(table: str, column: str, bound: int) -> str:
    """A negative bound asks for the strict comparison."""
    words = "strictly above" if bound < 0 else "at least"
    return f"List the names of {table} whose {column} is {words} {abs(bound)}."


def _tasks(benchmark: str):
    def load(data_cfg):
        from evaluators.base import Task
        from evaluators.sql.checker import SQLReference
        from evaluators.sql.features import question_features
        table, column, rows = TABLES[benchmark]
        root = pathlib.Path(data_cfg.data_dir)
        root.mkdir(parents=True, exist_ok=True)
        db = root / f"{table}.sqlite"
        with filelock.FileLock(str(db) + ".lock"):
            if not db.exists():
                tmp = db.with_suffix(".tmp")
                tmp.unlink(missing_ok=True)
                conn = sqlite3.connect(tmp)
                conn.execute(f"CREATE TABLE {table} (name TEXT, {column} INTEGER)")
                conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
                conn.commit()
                conn.close()
                tmp.rename(db)
        schema = f"Database: {table}\nSchema:\nCREATE TABLE {table} (name TEXT, {column} INTEGER);"
        out = []
        for tid, bound in QUESTIONS[benchmark].items():
            q = question(table, column, bound)
            gold = f"SELECT name FROM {table} WHERE {column} {'>' if bound < 0 else '>='} " \
                   f"{abs(bound)}"
            out.append(Task(tid, "sql", benchmark, q, schema, "join / predicate",
                            reference=SQLReference(gold, str(db), "spider"),
                            features={"db_id": table, **question_features(q)},
                            environment=table))
        return out
    return load


for _name in TABLES:   # the registry is a dict checked at import; extras join it like this
    BENCHMARKS.setdefault(_name, Benchmark(
        _name, f"sweep test benchmark ({_name})", "Text-to-SQL", "SQLite", "exec. accuracy",
        "predicate", _tasks(_name), sql_evaluator(10.0), SQL, "", "everything", extra=True))


def scripted_reply(messages: list[dict], as_json: bool = False) -> str | None:
    """The scripted backbone: the reply to each prompt template, from the prompt's text; a
    request with an output constraint (``as_json``) gets the structured replies as JSON."""
    user = messages[-1]["content"]
    if "Propose up to" in user:   # GENERATE_LOCAL_ALTERNATIVES
        column, bound = re.search(r"(\w+) > (\d+)", user).groups()
        if as_json:
            return json.dumps({"edits": [{"find": f"{column} > {bound}",
                                          "replace": f"{column} >= {bound}"}]})
        return f"EDIT 1\nFIND: {column} > {bound}\nREPLACE: {column} >= {bound}"
    if "Original action (failed):" in user:   # DISTIL_RECORD
        situation = "an inclusive 'at least' threshold was written as a strict comparison"
        if as_json:
            return json.dumps({"situation": situation, "condition": "bound == inclusive"})
        return f"SITUATION: {situation}\nCONDITION: bound == inclusive"
    if "Your draft action:" in user:   # REVISE_WITH_RECORD
        draft = re.search(r"Your draft action:\n```\n(.*?)\n```", user, re.S).group(1)
        return "```sql\n" + re.sub(r" > (\d+)", r" >= \1", draft) + "\n```"
    found = re.search(r"names of (\w+) whose (\w+) is (?:at least|strictly above) (\d+)", user)
    if SQL.instructions in user and found:   # DRAFT_ACTION: always the strict comparison
        table, column, bound = found.groups()
        return f"```sql\nSELECT name FROM {table} WHERE {column} > {bound}\n```"
    return None


class ScriptedServer(LocalOpenAIServer):
    """A loopback OpenAI-format server answering with ``scripted_reply``; prompts it has no
    reply for are kept in ``unscripted`` (and answered with text no parser accepts). ``slow``
    maps a text to extra seconds for prompts that contain it (a phase that lasts long enough to
    be killed midway)."""

    def __init__(self, latency_s: float = 0.0, name: str = "scripted",
                 slow: dict[str, float] | None = None):
        super().__init__(latency_s=latency_s, name=name)
        self.unscripted: list[str] = []
        self.slow = dict(slow or {})

    def reply(self, request: dict) -> dict:
        last = request["messages"][-1]["content"]
        time.sleep(sum(s for text, s in self.slow.items() if text in last))
        out = super().reply(request)
        text = scripted_reply(request["messages"], "response_format" in request)
        if text is None:
            self.unscripted.append(request["messages"][-1]["content"][:300])
            text = "no scripted reply"
        out["choices"][0]["message"]["content"] = text
        return out


def get_config(benchmark: str = "sweep_people"):
    """The per-run config of the sweep tests (``run_config = "tests/sweep_fixture.py:{benchmark}"``);
    the sweep's overrides give ``data.data_dir`` and ``splits.manifest``."""
    c = default_config()
    c.data.benchmark = benchmark
    c.agent.max_attempts = 2
    # a URL file: the runs use the servers of the host they run on (COUNTERMEM_LLM_URLS)
    c.backbone.update(kind="openai", model="scripted", base_urls="vllm_urls.txt",
                      timeout_s=30.0, max_attempts=2)
    c.selector.update(total_decisions=6, learning_starts=1, train_every=1, target_sync_every=2,
                      checkpoint_every=3, batch_size=2, seeds=(0,))
    c.eval.concurrency = 2
    return c


def write_manifest(path: pathlib.Path) -> pathlib.Path:
    path.write_text(json.dumps(MANIFEST))
    return path


def vllm_reply(request: dict) -> str | None:
    """The scripted reply as the stand-in vLLM (tests/fake_bin/vllm, $FAKE_VLLM_RESPONDER) gives
    it; None for a prompt without one (the server then meets the request's schema itself)."""
    return scripted_reply(request["messages"], "response_format" in request)
