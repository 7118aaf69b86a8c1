"""Prints a readable summary of a memory store file, or of a workdir's memory at work.

    python -m countermem_jax.inspect_store --store=WORKDIR/store.jsonl [--top=10]
    python -m countermem_jax.inspect_store --store=WORKDIR/store.jsonl --config=configs/X.py
    python -m countermem_jax.inspect_store --workdir=WORKDIR
"""
import sys

from absl import flags, logging
from ml_collections import config_flags

from countermem_jax import cli
from countermem_jax.method.memory import load_store
from countermem_jax.method.memory import world
from countermem_jax.method.memory.summary import summarize
from countermem_jax.protocol.record_at_work import record_at_work
from countermem_jax.runtime import phase_locks

_STORE = flags.DEFINE_string("store", None, "Path of a store file (open or frozen).")
_WORKDIR = flags.DEFINE_string("workdir", None, "A workdir: show a record used in evaluation.")
_TOP = flags.DEFINE_integer("top", 10, "How many records to show in full.")
_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "The experiment config: check the records' worlds against its data.",
    lock_config=True)


def main(argv):
    """Prints ``memory.summary.summarize`` of the store, or a workdir's record at work; a file
    that fails validation exits with one line naming the file, line and field. Read-only: the
    store is never rewritten.
    """
    del argv
    if _WORKDIR.value:
        root = cli.existing_dir(_WORKDIR.value, "--workdir")
        # what it reads (the frozen store, the evaluation logs) must not be half written
        phase_locks.refuse_if_running(root, "inspect_store", ("build_memory", "evaluate"))
        print(record_at_work(root))
        return
    if not _STORE.value:
        print("error: give --store=FILE or --workdir=DIR", file=sys.stderr)
        sys.exit(1)
    cli.check_utf8(_STORE.value, "--store")
    store = load_store(_STORE.value)
    check = None
    if _CONFIG.value is not None:   # the data after the store: a broken store costs nothing
        from countermem_jax import domains
        if not flags.FLAGS["verbosity"].present:   # the loaders' INFO lines; -v 0 shows them
            logging.set_verbosity(logging.WARNING)
        tasks, evaluator, _ = domains.load_benchmark(cli.loaded_config(_CONFIG, "config").data)
        check = world.WorldCheck(evaluator, tasks)
    print(summarize(store, top=_TOP.value))
    print()
    print(world.report(store.records, check))


if __name__ == "__main__":
    cli.run_main(main)
