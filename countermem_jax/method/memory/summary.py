"""A readable summary of a store: what a researcher looks at first."""
import collections
import textwrap

import numpy as np

from countermem_jax.method.memory import scoring
from countermem_jax.method.memory.store import FrozenStore, MemoryStore


def _distribution(name: str, values: np.ndarray) -> str:
    """One text line with mean and quantiles (min, p25, median, p75, max) of ``values``."""
    if values.size == 0:
        return f"  {name:<6} (no records)"
    q = np.percentile(values, [0, 25, 50, 75, 100])
    return (f"  {name:<6} mean {values.mean():+.3f}  min {q[0]:+.3f}  p25 {q[1]:+.3f}  "
            f"median {q[2]:+.3f}  p75 {q[3]:+.3f}  max {q[4]:+.3f}")


def _clip(text: str, width: int) -> str:
    """Collapses whitespace and cuts ``text`` to ``width`` characters (with an ellipsis)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summarize(store: MemoryStore | FrozenStore, top: int = 10) -> str:
    """Multi-line text report of ``store`` (open or frozen); ``top`` limits the record listing.

    The listed records are ranked by the same retention score S_keep that eviction uses, computed
    with the store's own retention weights, so the listing shows what the store values most. Only
    reads the store: summarising a frozen snapshot does not change its hash.
    """
    records = store.records
    cfg = store.config
    lines = [
        f"store {store.snapshot_id}  ({'frozen' if isinstance(store, FrozenStore) else 'open'})  "
        f"hash {store.content_hash()[:16]}",
        f"records {len(records)} / capacity {cfg.capacity}   retention {cfg.retention}   "
        f"evictions so far {store.evictions}",
        "",
        "by domain / benchmark:",
    ]
    counts = collections.Counter((r.provenance.domain, r.provenance.benchmark) for r in records)
    lines += [f"  {d:<10} {b:<22} {n:>5}" for (d, b), n in sorted(counts.items())] or ["  (none)"]
    with_cond = sum(bool(r.condition) for r in records)
    used = [r for r in records if r.uses]
    lines += [
        "",
        f"conditions: {with_cond} conditional, {len(records) - with_cond} universal",
        f"reuse: {len(used)} records used during construction, {sum(r.uses for r in records)} uses, "
        f"{sum(r.helpful_uses for r in records)} helpful, {sum(r.harmful_uses for r in records)} "
        "harmful",
        "distributions:",
        _distribution("delta", np.array([r.delta for r in records])),
        _distribution("u", np.array([r.reuse_utility for r in records])),
        _distribution("S_adm", np.array([r.admission_score for r in records])),
    ]
    if records:
        keep = scoring.keep_scores(records, scoring.advice_embeddings(records), cfg.retention_weights)
        # Stable sort: equal scores keep insertion order, so the listing is reproducible.
        order = np.argsort(-keep, kind="stable")[:top]
        lines += ["", f"top {len(order)} records by retention score S_keep:"]
        for rank, i in enumerate(order, 1):
            r = records[i]
            lines.append(f"{rank:>3}. {r.record_id}  from {r.source_task_id}  S_keep {keep[i]:+.3f}  "
                         f"Δ {r.delta:+.2f}  u {r.reuse_utility:+.2f}  uses {r.uses}")
            lines.append(textwrap.indent(
                f"q: {_clip(r.situation, 100)}\n"
                f"c: {_clip(r.condition, 100) if r.condition else '(universal)'}\n"
                f"-  {_clip(r.original_action, 100)}\n+  {_clip(r.improved_action, 100)}", "     "))
    return "\n".join(lines)
