r"""What selector training in waves changes: best validation return and wall time at W=1 vs W=16.

    python -m benchmarks.speed.selector_waves            # about 5 minutes on 2 CPU cores

Builds one store on Spider (the CPU quickstart's eight databases) with a scripted backbone, then
trains the selector seeds from it once per wave size W (``selector.wave_size``,
docs/concurrency.md) and prints, per W, each seed's best mean validation return, their mean and
95% bootstrap interval, and the training wall time with every LLM call answered after
``--latency_s`` (a stand-in for a served model; the checker is the real SQLite one). A larger W
acts with a staler policy inside each wave; this measures what that costs in return.

The scripted backbone (``SpiderScript``) knows each task's gold query. Its drafts are right for
four tasks in ten and empty-result (``LIMIT 0``) otherwise; construction's counterfactual edit
lifts the limit and distils a record with the rule condition ``has db_id``. Revising a draft
with a record fixes it for four tasks in ten, leaves it wrong for two, and breaks two of the
right drafts, so that using memory helps on some tasks and hurts on others and the selector has
something to learn. Ends with a ``result: {json}`` line.
"""
import hashlib
import pathlib
import tempfile
import time

import asyncio
import ml_collections
import numpy as np
from absl import app, flags

from countermem_jax import domains, experiment
from countermem_jax.protocol import intervals
from countermem_jax.backbones.base import Charge, SamplingParams
from countermem_jax.protocol import config_files
from benchmarks.common import print_result

from benchmarks.testing.scripted_backbone import ScriptedBackbone

_WAVES = flags.DEFINE_list("waves", ["1", "16"], "wave sizes to compare")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "selector seeds (each trained at every W)")
_DECISIONS = flags.DEFINE_integer("decisions", 240, "selector.total_decisions")
_LATENCY = flags.DEFINE_float("latency_s", 0.02, "seconds before each scripted reply")


def _fence(sql: str) -> str:
    return f"```sql\n{sql}\n```"


class SpiderScript(ScriptedBackbone):
    """Scripted replies per task (module docstring), each after ``latency_s``."""

    def __init__(self, tasks, latency_s: float):
        super().__init__()
        self.latency_s = latency_s
        for task in tasks:
            gold = " ".join(task.reference.gold_sql.split())
            kind = int(hashlib.sha256(task.task_id.encode()).hexdigest(), 16) % 10
            wrong = f"SELECT * FROM ({gold}) LIMIT 0"
            fixed = f"SELECT * FROM ({gold}) LIMIT 1000000"
            draft = gold if kind < 4 else wrong
            revised = {0: wrong, 1: wrong, 2: gold, 3: gold}.get(kind, fixed if kind < 8 else wrong)
            key = f"/{task.task_id}#"
            self.add(_fence(draft), template="DRAFT_ACTION", task=key)
            self.add(_fence(revised), template="REVISE_WITH_RECORD", task=key)
        self.add("EDIT 1\nFIND: LIMIT 0\nREPLACE: LIMIT 1000000",
                 template="GENERATE_LOCAL_ALTERNATIVES")
        self.add("SITUATION: the query's result was cut to zero rows by a LIMIT 0\n"
                 "CONDITION: has db_id", template="DISTIL_RECORD")

    async def chat(self, messages, params: SamplingParams = SamplingParams(),
                   charge: Charge = Charge()):
        """The scripted reply after the stand-in server's latency."""
        await asyncio.sleep(self.latency_s)
        return await super().chat(messages, params, charge)


def small_spider_config(decisions: int, seeds) -> ml_collections.ConfigDict:
    """The CPU quickstart's Spider databases and splits, with a longer selector run."""
    cfg = config_files.load("configs/spider_react_cpu.py")
    cfg.splits.update(n_build=20, n_train=32, n_validation=8, n_eval=4)
    cfg.construction.update(reuse_policy="always_top1")
    cfg.selector.update(total_decisions=decisions, learning_starts=20, train_every=1,
                        target_sync_every=20, checkpoint_every=max(decisions // 4, 1),
                        batch_size=16, seeds=tuple(seeds))
    cfg.backbone.cache_dir = ""
    return cfg


def measure(waves, seeds, decisions: int, latency_s: float) -> dict:
    """Builds one store, trains the seeds from it at every W; per W the seeds' best validation
    returns, their spread and the training wall time."""
    cfg = small_spider_config(decisions, seeds)
    benchmark = domains.load_benchmark(cfg.data)
    root = pathlib.Path(tempfile.mkdtemp(prefix="selector_waves_"))
    built = root / "built"
    experiment.build_memory(cfg, built, backbone=SpiderScript(benchmark[0], 0.0),
                            benchmark=benchmark)
    out = {}
    for w in waves:
        cfg.selector.wave_size = w
        wd = root / f"w{w}"
        wd.mkdir()
        for name in ("store_frozen.jsonl", "store_frozen.sha256", "splits.json",
                     "fingerprint.json"):
            (wd / name).write_bytes((built / name).read_bytes())
        start = time.perf_counter()
        summary = experiment.train_selector(cfg, wd, backbone=SpiderScript(benchmark[0],
                                                                             latency_s),
                                            benchmark=benchmark)
        wall = time.perf_counter() - start
        best = [summary["seeds"][str(s)]["best_val_return"] for s in seeds]
        spread = intervals.summarize(np.array(best)[:, None])  # over seeds
        out[w] = {"best_val_return_per_seed": best, "mean_best_val_return": spread["mean"],
                  "std_over_seeds": spread["std"], "ci95": spread["ci95"],
                  "train_wall_s": round(wall, 2),
                  "episodes": [summary["seeds"][str(s)]["episodes"] for s in seeds]}
    return out


def main(argv):
    """Prints one line per W and the ``result:`` line."""
    del argv
    waves = [int(w) for w in _WAVES.value]
    seeds = [int(s) for s in _SEEDS.value]
    per_wave = measure(waves, seeds, _DECISIONS.value, _LATENCY.value)
    for w, r in per_wave.items():
        print(f"W={w}: best validation return per seed {r['best_val_return_per_seed']}, mean "
              f"{r['mean_best_val_return']:.4f}, training {r['train_wall_s']:.1f} s")
    first, last = per_wave[waves[0]], per_wave[waves[-1]]
    print_result({"benchmark": "spider (8 CPU-quickstart databases), scripted backbone",
                  "decisions": _DECISIONS.value, "seeds": seeds, "latency_s": _LATENCY.value,
                  "per_wave": {str(w): r for w, r in per_wave.items()},
                  "return_difference_last_minus_first": last["mean_best_val_return"]
                  - first["mean_best_val_return"],
                  "train_speedup_last_over_first": first["train_wall_s"] / last["train_wall_s"]})


if __name__ == "__main__":
    app.run(main)
