r"""Construction yield on the CPU model: how many counterfactual checks become records (§3.2-3.3).

    python -m benchmarks.tuning.record_yield [--n=12] [--cpu_model=qwen2.5-coder-0.5b] \
        [--draft_questions=40] [--db_ids=car_1,pets_1,...] [--cache_dir=DIR] [--workdir=DIR]

Runs the construction phase of the CPU config (configs/spider_react_cpu.py) on ``--n`` Spider dev
questions drawn with a fixed seed from ``--db_ids`` (default: the tuning pool's nine databases;
a report-pool database, or an empty list meaning every database, is refused with one line
before anything loads: protocol/pools.py), with the real SQLite checker, and prints per
candidate source (the label each candidate carries: the model's edits, each rule family) the
checks and verified counts, the unparseable and the truncated replies per template (a reply is
truncated when it used its whole token budget: llama.cpp's finish_reason "length"),
the records, tokens per verified record and the wall time with the load average (the machine
may be shared). With ``--draft_questions`` it first measures first-attempt accuracy on that
many seeded questions twice, with DRAFT_ACTION and with a plain zero-shot prompt (schema, then
the question), greedy. Replies are cached in ``--cache_dir``, so a rerun costs only the
checks. Last line: ``result: {json}`` with ``verified_share`` (verified / counterfactual
checks), ``unparseable`` (replies whose format broke), ``no_usable_content`` (well-formed
replies whose content was refused, e.g. every edit a no-op), ``truncated``, ``records``,
``tokens_per_record``, ``draft_accuracy`` (construction's first attempts solved by the
memory-free draft), the wall time and the ``db_ids`` read.
"""
import collections
import json
import os
import pathlib
import random
import sys
import tempfile
import time

from absl import app, flags

from countermem_jax import experiment
from countermem_jax.backbones.base import Backbone, Charge, SamplingParams
from countermem_jax.protocol.construction_tally import standing, tally
from countermem_jax.method.memory import load_frozen
from benchmarks.common import print_result
from countermem_jax.method.prompting import prompts
from countermem_jax.protocol import pools
from countermem_jax.runtime.runlog import RunLog

_N = flags.DEFINE_integer("n", 12, "Construction tasks (Spider dev questions).")
_MODEL = flags.DEFINE_string("cpu_model", "", "CPU model (backbone.cpu_model); '' = config's.")
_DRAFTS = flags.DEFINE_integer("draft_questions", 0, "Questions for the draft-prompt comparison.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the question sample.")
_CACHE = flags.DEFINE_string("cache_dir", "", "Response cache (default: inside the workdir).")
_WORKDIR = flags.DEFINE_string("workdir", "", "Workdir (default: a new temporary folder).")
_DB_IDS = flags.DEFINE_list("db_ids", list(pools.tuning_pool()),
                            "Spider databases the questions are drawn from; tuning pool only.")
_THREADS = flags.DEFINE_integer("threads", 0, "llama.cpp threads (0: all cores; 1 on a busy "
                                "machine, where threads waiting on each other stall decoding).")


class FinishCounter(Backbone):
    """Counts, per template, the calls and the replies stopped by their token limit. A backbone
    that reports ``finish_reason`` is read directly; otherwise (llama.cpp through this
    project's backbone, and replies from the response cache) a reply whose completion used
    the whole ``max_tokens`` is the one llama.cpp reports as finish_reason "length"."""

    def __init__(self, inner: Backbone):
        super().__init__(inner.ledger)
        self.inner = inner
        self.model_name = inner.model_name
        self.reasoning_effort = inner.reasoning_effort
        self.calls, self.truncated = collections.Counter(), collections.Counter()

    async def chat(self, messages, params: SamplingParams = SamplingParams(),
                   charge: Charge = Charge()):
        result = await self.inner.chat(messages, params, charge)
        reason = getattr(result, "finish_reason", "") or (
            "length" if result.usage.completion_tokens >= params.max_tokens else "stop")
        self.calls[charge.purpose] += 1
        self.truncated[charge.purpose] += reason == "length"
        return result

    async def _chat(self, messages, params):
        return await self.inner._chat(messages, params)

    async def aclose(self):
        await self.inner.aclose()


def cpu_config(manifest: pathlib.Path, cpu_model: str = "", cache_dir: str = "",
               db_ids=pools.tuning_pool()):
    """The CPU quickstart config on the tasks of ``manifest``, drawn from ``db_ids``; raises
    ``pools.PoolError`` for a report-pool database or an empty ``db_ids`` (every database)."""
    from countermem_jax.protocol import config_files
    pools.require_tuning_pool("spider", db_ids, "benchmarks.tuning.record_yield --db_ids")
    cfg = config_files.load("configs/spider_react_cpu.py")
    cfg.data.db_ids = tuple(db_ids)
    cfg.splits.manifest = str(manifest)
    if cpu_model:
        cfg.backbone.cpu_model = cpu_model
    if cache_dir:
        cfg.backbone.cache_dir = cache_dir
    return cfg


def sample_manifest(tasks, n: int, seed: int) -> dict:
    """``n`` construction tasks drawn with ``seed``; one task each for the other splits (only
    construction runs here)."""
    drawn = random.Random(seed).sample(list(tasks), n + 3)
    ids = [t.task_id for t in drawn]
    return {"build": ids[:n], "train": ids[n:n + 1], "validation": ids[n + 1:n + 2],
            "eval": ids[n + 2:]}


def construction_yield(cfg, workdir, backbone: Backbone, benchmark=None) -> dict:
    """Runs construction with ``backbone`` (wrapped in ``FinishCounter``) and returns the
    figures of the module docstring."""
    counter = FinishCounter(backbone)
    start = time.perf_counter()
    summary = experiment.build_memory(cfg, workdir, backbone=counter, benchmark=benchmark)
    wall = time.perf_counter() - start
    workdir = pathlib.Path(workdir)
    log = RunLog(workdir / "log.jsonl")
    failures_file = workdir / "parse_failures.jsonl"
    failures = ([json.loads(line) for line in failures_file.read_text().splitlines() if line]
                if failures_file.exists() else [])
    t = tally(standing(log.events()), failures)
    first = [d for d in log.events("decision") if d.get("decision") == 0]
    records = len(load_frozen(workdir / "store_frozen.jsonl"))
    tokens = int(summary.get("tokens", 0))
    return {"sources": t["sources"], "checks": t["checks"], "verified": t["verified"],
            "verified_share": round(t["verified"] / t["checks"], 4) if t["checks"] else 0.0,
            "unparseable": sum(t["unparseable"].values()),
            "unparseable_per_template": t["unparseable"], "not_local": t["not_local"],
            "no_usable_content": sum(t["no_usable_content"].values()),
            "no_usable_content_per_template": t["no_usable_content"],
            "truncated": sum(counter.truncated.values()),
            "truncated_per_template": {k: v for k, v in sorted(counter.truncated.items()) if v},
            "calls_per_template": dict(sorted(counter.calls.items())),
            "records": records, "never_holds": t["never_holds"], "tokens": tokens,
            "tokens_per_record": round(tokens / records) if records else None,
            "tasks": len(first),
            # first attempts solved by the memory-free draft itself (a revision by a record
            # does not count: its draft was never checked)
            "draft_accuracy": round(sum(d["outcome"]["success"] and not d["changed"]
                                        for d in first) / len(first), 4) if first else 0.0,
            "wall_s": round(wall, 1),
            "verified_per_minute": round(t["verified"] / (wall / 60), 3) if wall else 0.0}


def zero_shot_messages(task) -> list[dict]:
    """A plain zero-shot text-to-SQL prompt: the schema, then the question (CALIBRATION.md)."""
    return [{"role": "user", "content": f"{task.context}\n\nQuestion: {task.prompt}\n\n"
                                        "Write the SQLite query that answers the question."}]


def draft_accuracy(backbone: Backbone, tasks, evaluator, domain, agent_cfg) -> dict:
    """First-attempt accuracy of DRAFT_ACTION and of the zero-shot prompt on the same tasks,
    greedy; replies that do not parse are checked raw (as the agent does)."""
    # 256 tokens for both prompts (a query needs about 40): what the calibration probe used,
    # so a reply cut off here is prose, not SQL
    params = SamplingParams(max_tokens=256, seed=agent_cfg.seed)
    solved, truncated = collections.Counter(), collections.Counter()
    for task in tasks:
        draft = prompts.DRAFT_ACTION.messages(
            **prompts.task_fields(task), instructions=domain.instructions, history="")
        for name, messages, p in (
                ("draft", draft, params),
                ("zero_shot", zero_shot_messages(task), params)):
            result = backbone.chat_sync(messages, p, Charge(purpose=f"probe_{name}"))
            truncated[name] += result.usage.completion_tokens >= p.max_tokens
            try:
                action = domain.parse_action(result.text)
            except Exception:  # an unparsable reply is checked raw, as Agent.draft does
                action = result.text.strip()
            solved[name] += evaluator.evaluate(evaluator.reset(task), action).success
    n = len(tasks)
    return {"questions": n, "draft_solved": solved["draft"],
            "zero_shot_solved": solved["zero_shot"],
            "draft_truncated": truncated["draft"], "zero_shot_truncated": truncated["zero_shot"]}


def print_table(r: dict) -> None:
    """The per-source and per-template figures, readable."""
    print(f"{'source':<28}{'checks':>8}{'verified':>10}{'screened':>10}")
    for source, row in r["sources"].items():
        print(f"{source:<28}{row['checks']:>8}{row['verified']:>10}{row['screened']:>10}")
    print(f"{'all':<28}{r['checks']:>8}{r['verified']:>10}   share {r['verified_share']:.3f}")
    print(f"{'template':<28}{'calls':>8}{'unparseable':>13}{'no usable':>11}{'truncated':>11}")
    for name, calls in r["calls_per_template"].items():
        print(f"{name:<28}{calls:>8}{r['unparseable_per_template'].get(name, 0):>13}"
              f"{r['no_usable_content_per_template'].get(name, 0):>11}"
              f"{r['truncated_per_template'].get(name, 0):>11}")
    print(f"records {r['records']} (refused, condition never holds: {r['never_holds']}); model "
          f"edits not local: {r['not_local']}; tokens {r['tokens']}, per record "
          f"{r['tokens_per_record']}; first drafts solved {r['draft_accuracy']:.3f} of "
          f"{r['tasks']} tasks; wall {r['wall_s']} s, {r['verified_per_minute']} verified/min")


def main(argv):
    del argv
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from countermem_jax import domains
    from countermem_jax.backbones.factory import make_backbone
    try:  # the databases are checked, then read, before any folder is made or model loaded
        probe = cpu_config(pathlib.Path("manifest.json"), _MODEL.value, db_ids=_DB_IDS.value)
        tasks, evaluator, domain = domains.load_benchmark(probe.data)
    except (pools.PoolError, *domains.DATA_ERRORS) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(1)
    workdir = pathlib.Path(_WORKDIR.value or tempfile.mkdtemp(prefix="yield_"))
    workdir.mkdir(parents=True, exist_ok=True)
    manifest = workdir / "manifest.json"
    manifest.write_text(json.dumps(sample_manifest(tasks, _N.value, _SEED.value)))
    cache = _CACHE.value or str(workdir / "response_cache")
    cfg = cpu_config(manifest, _MODEL.value, cache, _DB_IDS.value)
    cfg.backbone.n_threads = _THREADS.value
    load = os.getloadavg()
    print(f"construction on {_N.value} Spider questions of {', '.join(cfg.data.db_ids)}, "
          f"model {cfg.backbone.cpu_model}, "
          f"load average {load[0]:.1f} / {load[1]:.1f} on {os.cpu_count()} cores")
    backbone = make_backbone(cfg.backbone)
    drafts = {}
    if _DRAFTS.value:
        questions = random.Random(_SEED.value).sample(list(tasks), _DRAFTS.value)
        from countermem_jax.method.agents import AgentConfig
        drafts = draft_accuracy(backbone, questions, evaluator, domain,
                                AgentConfig(**cfg.agent.to_dict()))
        print(f"first attempts on {drafts['questions']} seeded questions: DRAFT_ACTION "
              f"{drafts['draft_solved']}, zero-shot {drafts['zero_shot_solved']}")
    r = construction_yield(cfg, workdir / "run", backbone, (tasks, evaluator, domain))
    print_table(r)
    r.update(drafts, model=cfg.backbone.cpu_model, n=_N.value, seed=_SEED.value,
             db_ids=list(cfg.data.db_ids),
             load_average=round(os.getloadavg()[0], 2), cores=os.cpu_count())
    print_result(r)


if __name__ == "__main__":
    app.run(main)
