"""Prints a readable summary of a memory store file.

    python -m countermem_jax.inspect_store --store=WORKDIR/store.jsonl [--top=10]
"""
import sys

from absl import app, flags

from countermem_jax.memory import StoreFormatError, load_store
from countermem_jax.memory.summary import summarize

_STORE = flags.DEFINE_string("store", None, "Path of a store file (open or frozen).")
_TOP = flags.DEFINE_integer("top", 10, "How many records to show in full.")


def main(argv):
    """Prints ``memory.summary.summarize`` of the store; a file that fails validation exits with
    one line naming the file, line and field. Read-only: the store is never rewritten.
    """
    del argv
    try:
        store = load_store(_STORE.value)
    except StoreFormatError as err:
        sys.exit(f"inspect_store: {err}")
    print(summarize(store, top=_TOP.value))


if __name__ == "__main__":
    flags.mark_flags_as_required(["store"])
    app.run(main)
