r"""How often Module I's SQL operators reach a fix of a real model's failed draft (paper §3.2).

    python -m benchmarks.tuning.sql_operators --n=60 --workdir=/tmp/sqlops \
        [--db_ids=car_1,...]

The CPU config's model (llama.cpp, its settings and reply limit, greedy) drafts each of ``n``
Spider questions (a seeded draw) of ``--db_ids`` (default: the tuning pool's nine databases; a
report-pool database, or an empty list meaning every database, is refused with one line before
the model loads: protocol/pools.py) with the project's DRAFT_ACTION template; replies are kept
in a response cache under ``workdir``, so a rerun makes no model call. For every failed draft
it generates the operators' candidates and checks each with the SQL checker: "exists" when some
candidate passes, "hit" when one of the ranked top 4 (ranked without the reference) passes;
both per operator family. Drafts whose reference result is
empty are left out (nothing verifies on them) and counted. Prints a table and a last line
``result: {json}`` (failed_drafts, fix_exists, fix_in_top4, top4_hit_rate, per family, the
``db_ids`` of the drawn questions).
"""
import asyncio
import collections
import pathlib
import random
import sys
import time

import ml_collections
from absl import app, flags

from countermem_jax.backbones.base import Charge, SamplingParams
from countermem_jax.backbones.factory import make_backbone
from countermem_jax import domains
from countermem_jax.protocol import pools
from countermem_jax.protocol import config_files
from countermem_jax.domains import sql as sql_domain
from countermem_jax.domains import sql as sql_operators
from benchmarks.common import print_result
from countermem_jax.method.prompting import prompts
from countermem_jax.method.prompting.failures import ParseFailureLog

_N = flags.DEFINE_integer("n", 60, "Spider questions drafted (a seeded draw).")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the question draw.")
_WORKDIR = flags.DEFINE_string("workdir", "/tmp/countermem_sql_operators",
                               "Where the response cache goes.")
_DB_IDS = flags.DEFINE_list("db_ids", list(pools.tuning_pool()),
                            "Spider databases the questions are drawn from; tuning pool only.")


def _draft(backbone, task, params) -> str:
    """The agent's first action for ``task`` (as ``Agent.draft`` asks for it)."""
    parsed = asyncio.run(prompts.call_template(
        backbone, prompts.DRAFT_ACTION,
        {**prompts.task_fields(task), "instructions": sql_domain.SQL.instructions,
         "history": ""},
        charge=Charge("other", f"{task.task_id}#0"), params=params,
        parse_args={"domain": sql_domain.SQL}, failures=ParseFailureLog()))
    return parsed.value if parsed.ok else parsed.raw.strip()


def drawn_tasks(n: int, seed: int, db_ids=pools.tuning_pool()) -> list:
    """``n`` Spider questions of ``db_ids`` drawn with ``seed``; raises ``pools.PoolError`` for a
    report-pool database or an empty ``db_ids`` (every database), before anything is read."""
    pools.require_tuning_pool("spider", db_ids, "benchmarks.tuning.sql_operators --db_ids")
    tasks = sql_domain.spider_tasks(ml_collections.ConfigDict({"db_ids": tuple(db_ids)}))
    return random.Random(seed).sample(tasks, min(n, len(tasks)))


def measure(tasks: list, seed: int, workdir: str) -> dict:
    """Drafts, checks and operator figures over ``tasks`` (drawn with ``seed``); prints a row
    per failure."""
    from evaluators.sql.probe import Database
    cfg = config_files.load("configs/spider_react_cpu.py")
    backbone_cfg = cfg.backbone.copy_and_resolve_references()
    backbone_cfg.cache_dir = str(pathlib.Path(workdir) / "response_cache")
    backbone = make_backbone(backbone_cfg)
    params = SamplingParams(max_tokens=cfg.agent.max_tokens)
    evaluator = sql_domain.sql_evaluator(10.0)({})
    counts = collections.Counter()
    exists, hits = collections.Counter(), collections.Counter()
    start = time.perf_counter()
    for task in tasks:
        draft = _draft(backbone, task, params)
        outcome = evaluator.evaluate(evaluator.reset(task), draft)
        if outcome.success or outcome.details.get("reference_empty"):
            kind = "solved" if outcome.success else "reference_empty"
            counts[kind] += 1
            print(f"{task.task_id:42} {kind}", flush=True)
            continue
        counts["failed_drafts"] += 1
        counts["sql_error"] += "error" in outcome.details
        db = Database(task.reference.db_path)
        error = outcome.details.get("error") or outcome.feedback
        made = sql_operators.generate(draft, db, task.prompt, error)
        top = sql_operators.rank(draft, made, db, task.prompt, k=4)

        def passes(sql):
            return evaluator.evaluate(evaluator.reset(task), sql).success
        fixing = {c.sql: c.family for c in made if passes(c.sql)}
        top_fix = [c for c in top if c.sql in fixing]
        counts["candidates"] += len(made)
        if fixing:
            counts["fix_exists"] += 1
            for family in set(fixing.values()):
                exists[family] += 1
        if top_fix:
            counts["fix_in_top4"] += 1
            hits[top_fix[0].family] += 1
        print(f"{task.task_id:42} {'error' if 'error' in outcome.details else 'wrong':5} "
              f"candidates {len(made):3}  fix {'yes' if fixing else 'no ':3}  top-4 "
              f"{top_fix[0].family if top_fix else '-'}", flush=True)
    failed = counts["failed_drafts"]
    result = {"questions": len(tasks), "solved_drafts": counts["solved"],
              "failed_drafts": failed, "failed_with_sql_error": counts["sql_error"],
              "reference_empty_left_out": counts["reference_empty"],
              "fix_exists": counts["fix_exists"], "fix_in_top4": counts["fix_in_top4"],
              "top4_hit_rate": round(counts["fix_in_top4"] / failed, 4) if failed else 0.0,
              "top4_share_of_existing": (round(counts["fix_in_top4"] / counts["fix_exists"], 4)
                                         if counts["fix_exists"] else 0.0),
              "candidates_per_failure": round(counts["candidates"] / failed, 1) if failed else 0,
              "exists_by_family": {f: exists[f] for f in sql_operators.FAMILIES},
              "top4_by_family": {f: hits[f] for f in sql_operators.FAMILIES},
              "max_tokens": cfg.agent.max_tokens, "seed": seed,
              "db_ids": sorted({t.environment for t in tasks}),
              "seconds": round(time.perf_counter() - start, 1)}
    return result


def format_table(result: dict) -> str:
    """Per family: failures a fix of that family exists for, and top-4 hits it made."""
    lines = [f"{'family':16}{'fix exists':>12}{'top-4 hit':>12}"]
    for f in sql_operators.FAMILIES:
        lines.append(f"{f:16}{result['exists_by_family'][f]:>12}{result['top4_by_family'][f]:>12}")
    lines.append(f"{'any':16}{result['fix_exists']:>12}{result['fix_in_top4']:>12}"
                 f"   of {result['failed_drafts']} failed drafts "
                 f"({result['solved_drafts']} of {result['questions']} drafts solved)")
    return "\n".join(lines)


def main(argv):
    del argv
    try:  # the databases are checked and read before the model loads
        tasks = drawn_tasks(_N.value, _SEED.value, _DB_IDS.value)
    except (pools.PoolError, *domains.DATA_ERRORS) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(1)
    result = measure(tasks, _SEED.value, _WORKDIR.value)
    print(format_table(result))
    print_result(result)


if __name__ == "__main__":
    app.run(main)
