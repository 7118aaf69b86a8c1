"""Prints a readable summary of a memory store file, or of a workdir's memory at work.

    python -m countermem_jax.inspect_store --store=WORKDIR/store.jsonl [--top=10]
    python -m countermem_jax.inspect_store --workdir=WORKDIR

With ``--workdir`` (after the three phases) it shows one evaluation task where a record was
used (§3.4): the memory-free draft, the record, the revised action, the checker's verdict and
whether memory rescued or broke the task against the base run; with an empty store, one line
saying why (construction's checks per source, verified, unparseable replies).
"""
import sys

from absl import app, flags

from countermem_jax.method.memory import StoreFormatError, load_store
from countermem_jax.method.memory.summary import summarize
from countermem_jax.protocol.record_at_work import record_at_work

_STORE = flags.DEFINE_string("store", None, "Path of a store file (open or frozen).")
_WORKDIR = flags.DEFINE_string("workdir", None, "A workdir: show a record used in evaluation.")
_TOP = flags.DEFINE_integer("top", 10, "How many records to show in full.")


def main(argv):
    """Prints ``memory.summary.summarize`` of the store; a file that fails validation exits with
    one line naming the file, line and field. Read-only: the store is never rewritten.
    """
    del argv
    if _WORKDIR.value:
        print(record_at_work(_WORKDIR.value))
        return
    if not _STORE.value:
        sys.exit("inspect_store: give --store=FILE or --workdir=DIR")
    try:
        store = load_store(_STORE.value)
    except StoreFormatError as err:
        sys.exit(f"inspect_store: {err}")
    print(summarize(store, top=_TOP.value))


if __name__ == "__main__":
    app.run(main)
