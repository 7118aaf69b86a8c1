"""Prints a readable summary of a memory store file, or of a workdir's memory at work.

    python -m countermem_jax.inspect_store --store=WORKDIR/store.jsonl [--top=10]
    python -m countermem_jax.inspect_store --workdir=WORKDIR

With ``--workdir`` (after the three phases) it shows one evaluation task where a record was
used (§3.4): the memory-free draft, the record, the revised action, the checker's verdict and
whether memory rescued or broke the task against the base run; with an empty store, one line
saying why (construction's checks per source, verified, unparseable replies). A path that is
not a store or not a workdir (missing, a file, a truncated or altered store) is one line on
stderr and exit status 1, for either flag (``cli.run_main``).
"""
import sys

from absl import flags

from countermem_jax import cli
from countermem_jax.method.memory import load_store
from countermem_jax.method.memory.summary import summarize
from countermem_jax.protocol.record_at_work import record_at_work

_STORE = flags.DEFINE_string("store", None, "Path of a store file (open or frozen).")
_WORKDIR = flags.DEFINE_string("workdir", None, "A workdir: show a record used in evaluation.")
_TOP = flags.DEFINE_integer("top", 10, "How many records to show in full.")


def main(argv):
    """Prints ``memory.summary.summarize`` of the store, or a workdir's record at work; a file
    that fails validation exits with one line naming the file, line and field. Read-only: the
    store is never rewritten.
    """
    del argv
    if _WORKDIR.value:
        print(record_at_work(cli.existing_dir(_WORKDIR.value, "--workdir")))
        return
    if not _STORE.value:
        print("error: give --store=FILE or --workdir=DIR", file=sys.stderr)
        sys.exit(1)
    print(summarize(load_store(_STORE.value), top=_TOP.value))


if __name__ == "__main__":
    cli.run_main(main)
