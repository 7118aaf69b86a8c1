"""Prints what a baseline mechanism stored, like ``inspect_store`` for CounterMem.

    python -m countermem_jax.baselines.inspect_memory WORKDIR/baselines/expel_frozen.jsonl
    python -m countermem_jax.baselines.inspect_memory --method=voyager --workdir=WORKDIR [--top=20]
"""
import collections
import json
import sys

from absl import app, flags

from countermem_jax.baselines import memory as memory_lib
from countermem_jax.method.memory.persistence import StoreFormatError

_METHOD = flags.DEFINE_string("method", None, "Method whose frozen memory to show (with --workdir).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Experiment work directory.")
_TOP = flags.DEFINE_integer("top", 20, "How many items to show.")

# Item fields worth printing, across all mechanisms; absent ones are skipped.
_SHOWN = ("name", "block", "title", "text", "description", "content", "importance", "step",
          "verdict", "task", "action", "steps")


def _clip(value, width: int = 160) -> str:
    """Collapses whitespace and cuts ``value`` to ``width`` characters (with an ellipsis)."""
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summarize_memory(mem, path=None, top: int = 20) -> str:
    """Text report of a baseline memory: identity, hash check, settings, state and the top items.

    ``path`` enables the sidecar-hash comparison; items are ordered by importance where the
    mechanism has one (others keep their memory order).
    """
    lines = [f"{mem.method} memory ({'frozen' if mem.frozen else 'open'})  hash "
             f"{mem.content_hash()[:16]}"]
    if path is not None and memory_lib.hash_path(path).exists():
        expected = memory_lib.hash_path(path).read_text().strip()
        lines.append(f"sidecar hash {'matches' if expected == mem.content_hash() else 'DIFFERS'}")
    lines.append(f"settings {json.dumps(memory_lib.thaw(mem.config), sort_keys=True)}")
    lines.append(f"builder state {json.dumps(memory_lib.thaw(mem.state), sort_keys=True)[:300]}")
    lines.append(f"processed construction tasks {len(mem.meta.get('processed_tasks', ()))}")
    counts = collections.Counter(i["kind"] for i in mem.items)
    lines.append("items: " + (", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "none"))
    items = sorted(mem.items, key=lambda i: -i.get("importance", 0))
    for n, item in enumerate(items[:top], 1):
        lines.append(f"{n:>3}. [{item['kind']}] {item['item_id']}  from "
                     f"{', '.join(item['source_task_ids']) or '(initial)'}")
        lines += [f"       {key}: {_clip(item[key])}" for key in _SHOWN if key in item]
    if len(items) > top:
        lines.append(f"… {len(items) - top} more (--top)")
    return "\n".join(lines)


def main(argv):
    """CLI entry: exactly one of a memory file or ``--method`` with ``--workdir``; a file that does
    not load exits with one line naming the problem.
    """
    if len(argv) > 2 or (len(argv) == 2) == bool(_METHOD.value and _WORKDIR.value):
        sys.exit("inspect_memory: give one memory file, or --method and --workdir")
    if len(argv) == 2:
        path = argv[1]
    else:
        from countermem_jax.baselines import memory_paths
        path = memory_paths(_WORKDIR.value, _METHOD.value).frozen
    try:
        mem = memory_lib.load_memory(path, _METHOD.value)
    except StoreFormatError as err:
        sys.exit(f"inspect_memory: {err}")
    print(summarize_memory(mem, path, _TOP.value))


if __name__ == "__main__":
    app.run(main)
