"""Checks a store's stale records again under the current checker and data, keeps those that
still hold and retires the rest (``method/reverify.py``; docs/method.md "Stale records").

    python -m countermem_jax.reverify_store --config=configs/spider_react_cpu.py \
        --store=DIR/store_frozen.jsonl --out=DIR/store_reverified.jsonl [--include_unstamped]

Prints one line per record checked (kept with its new Δ, or retired with why) and the counts;
the new store goes to ``--out`` and the input store is never rewritten.
"""
import pathlib

from absl import flags, logging
from ml_collections import config_flags

from countermem_jax import cli, domains
from countermem_jax.method import reverify
from countermem_jax.method.memory import load_store, save_store
from countermem_jax.method.memory.world import WorldCheck

_CONFIG = config_flags.DEFINE_config_file("config", None, "The experiment config (its data).",
                                          lock_config=True)
_STORE = flags.DEFINE_string("store", None, "The store file to re-verify (open or frozen).")
_OUT = flags.DEFINE_string("out", None, "Where the re-verified store goes (a new file).")
_INCLUDE_UNSTAMPED = flags.DEFINE_bool(
    "include_unstamped", False, "Also check records stored before stamps existed.")


def main(argv):
    """Loads the store, then the benchmark, re-verifies, writes ``--out``, prints the verdicts."""
    del argv
    if not flags.FLAGS["verbosity"].present:   # the loaders' INFO lines; -v 0 shows them
        logging.set_verbosity(logging.WARNING)
    cfg = cli.loaded_config(_CONFIG, "config")
    cli.check_utf8(_STORE.value, "--store")
    cli.check_utf8(_OUT.value, "--out")
    out = pathlib.Path(_OUT.value)
    if out.exists() or out.resolve() == pathlib.Path(_STORE.value).resolve():
        raise cli.PathError(f"--out={_OUT.value} already exists; give a new file (nothing is "
                            "overwritten, the input store is kept as it is)")
    cli.check_workdir(str(out.parent), "--out")
    store = load_store(_STORE.value)
    tasks, evaluator, _ = domains.load_benchmark(cfg.data)
    try:
        new, verdicts = reverify.reverify(store, WorldCheck(evaluator, tasks),
                                          _INCLUDE_UNSTAMPED.value)
    finally:
        evaluator.close()
    save_store(new, out)
    for v in verdicts:
        if v.status in (reverify.KEPT, reverify.RETIRED):
            print(f"{v.status:<8} {v.record_id}  from {v.source_task_id}: {v.why}; {v.detail}")
    print(reverify.summary_line(verdicts) + f"; wrote {out}")


if __name__ == "__main__":
    cli.run_main(main, required=("config", "store", "out"),
                 interrupted="interrupted: nothing was written; the input store is unchanged")
