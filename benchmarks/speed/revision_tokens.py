r"""Tokens of the revision with a record: ``memory.revision=replay_then_llm`` against ``llm``.

    python -m benchmarks.speed.revision_tokens [--n=40] [--attempts=2]

Runs the ReAct agent with CounterMem's Module III (always the top record) on ``--n`` generated
threshold questions over a table of people (``benchmarks/scripted_sql.people_tasks``), once per
revision mode, against the scripted SQL model served over a loopback HTTP server
(``benchmarks/scripted_sql.py``; it counts no usage, so the client counts the tokens of every prompt
and reply). About half the questions are drafted with a mistake (``LIMIT 0`` appended); the one
record is the checked correction of that mistake on the first flawed question. Under ``llm``
every use asks the model (REVISE_WITH_RECORD); under ``replay_then_llm`` the record's edit is
replayed where it has a place (the flawed drafts) and the model is asked only for the others.
It prints per mode the revision calls and tokens, all task-run tokens and the score, then the
ratios (replay_then_llm / llm); the last line is ``result: {json}`` with
``revision_token_ratio``, ``total_token_ratio``, ``replayed`` and ``scores``. The replies are a
function of the request alone, so the figures are the same on every run and machine; what
varies is only the share of drafts where the replay finds a place.
"""
import asyncio
import pathlib
import tempfile

from absl import app, flags

from countermem_jax.backbones.base import TokenLedger
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from countermem_jax.method.agents import Agent, AgentConfig, MemoryCalls
from countermem_jax.method.memory import CheckOutcome, Evidence, MemoryRecord, Provenance
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.method.retrieval.retrieve import RetrievalIndex
from countermem_jax.method.selector import policies
from benchmarks import scripted_sql
from benchmarks.common import print_result
from countermem_jax.protocol import config_files
from benchmarks.testing.openai_server import LocalOpenAIServer

FLAGS = flags.FLAGS
flags.DEFINE_integer("n", 40, "generated questions (the first flawed one gives the record)")
flags.DEFINE_integer("attempts", 2, "evaluated attempts per question (agent.max_attempts)")

MODES = ("llm", "replay_then_llm")


def _record(task) -> MemoryRecord:
    """The checked correction of the scripted mistake on ``task`` (no condition: offered on
    every draft, so every decision uses it)."""
    gold = task.reference.gold_sql
    check = CheckOutcome(1.0, True, True, "")
    return MemoryRecord(
        record_id="limit0", source_task_id=task.task_id,
        situation="a row limit of zero was appended to a query whose answer has rows",
        original_action=gold + scripted_sql.MISTAKE, improved_action=gold,
        evidence=Evidence(CheckOutcome(0.0, False, True, "no rows"), check), condition="",
        provenance=Provenance("sql", "spider", "scripted", "sql", "1", "2026-11-27"))


async def _run_mode(url: str, mode: str, tasks, evaluator, domain, record, attempts: int):
    ledger = TokenLedger()
    backbone = OpenAICompatibleBackbone(url, "scripted", ledger=ledger)
    agent = Agent(backbone, evaluator, domain, AgentConfig(**{**config_files.load("configs/default.py").agent.to_dict(), "max_attempts": attempts}))
    index = RetrievalIndex([record])
    aug = CounterMemAugmentation(MemoryCalls(agent), index_source=lambda: index,
                                 selector=policies.make_fixed("always_top1"), revision=mode)
    solved = tokens = 0
    try:
        for task in tasks:
            ctx = await agent.run(task, aug, phase="evaluation", run=mode)
            solved += ctx.solved
            tokens += ctx.tokens
    finally:
        await backbone.aclose()
    revision = ledger.by_purpose.get("REVISE_WITH_RECORD")
    return {"revision_tokens": revision.total if revision else 0, "tokens": tokens,
            "score": 100.0 * solved / len(tasks)}


def main(argv):
    del argv
    with tempfile.TemporaryDirectory() as tmp:
        tasks, evaluator, domain = scripted_sql.people_tasks(FLAGS.n, pathlib.Path(tmp))
        config = scripted_sql.responder_config(tasks)
        flawed = [t for t in tasks if scripted_sql._flawed(scripted_sql.task_key(t))]
        record = _record(flawed[0])
        others = [t for t in tasks if t.task_id != record.source_task_id]
        with LocalOpenAIServer(responder=scripted_sql.make_responder(config),
                               with_usage=False) as srv:
            out = {}
            for mode in MODES:
                srv.stats(reset=True)
                out[mode] = asyncio.run(_run_mode(srv.base_url, mode, others, evaluator,
                                                  domain, record, FLAGS.attempts))
                out[mode]["requests"] = srv.stats()["requests"]
    llm, mixed = out["llm"], out["replay_then_llm"]
    for mode in MODES:
        r = out[mode]
        print(f"{mode:>16}: {r['requests']} model calls, revision tokens {r['revision_tokens']}, "
              f"task-run tokens {r['tokens']}, score {r['score']:.1f}")
    ratio = mixed["revision_tokens"] / llm["revision_tokens"] if llm["revision_tokens"] else None
    total = mixed["tokens"] / llm["tokens"] if llm["tokens"] else None
    print(f"replay_then_llm / llm: revision tokens {ratio:.3f}, task-run tokens {total:.3f}, "
          f"model calls {mixed['requests'] / llm['requests']:.3f} ({len(others)} questions, "
          f"{len(flawed) - 1} drafted with the mistake)")
    print_result({"revision_token_ratio": ratio, "total_token_ratio": total,
                  "calls_ratio": mixed["requests"] / llm["requests"],
                  "questions": len(others), "flawed": len(flawed) - 1,
                  "scores": {m: out[m]["score"] for m in MODES}})


if __name__ == "__main__":
    app.run(main)
