"""A readable summary of a store: what a researcher looks at first.

Used by ``countermem_jax.inspect_store``. It shows the store's identity (snapshot id, content
hash), how full it is against capacity B (Appendix B.3), where its records came from, how many
carry an applicability condition c, what reuse was observed during construction, the
distributions of Δ, u and S_adm, and the records that retention (Eq. 5) would keep first.
``record_at_work`` shows, after the three phases, one evaluation task where a record changed the
draft (§3.4), or why the store is empty.
"""
import collections
import json
import pathlib
import textwrap

import numpy as np

from countermem_jax.memory import scoring
from countermem_jax.memory.store import FrozenStore, MemoryStore


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


def _rows(path: pathlib.Path) -> list[dict]:
    """The JSON lines of a log file ([] when it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _events(path: pathlib.Path, event: str) -> list[dict]:
    return [r for r in _rows(path) if r.get("event") == event]


# Paired verdicts, best shown first: a rescue is the method at work, a break its risk.
_VERDICTS = ("rescued", "broken", "solved by both", "failed by both")


def record_at_work(workdir) -> str:
    """One evaluation decision where the selector gave the model a record and the action
    changed, preferring a rescued task, then a broken one; or why there is none."""
    # imported here: the counterfactual module imports the memory package
    from countermem_jax.counterfactual import empty_store_reason, tally
    from countermem_jax.memory.persistence import load_frozen
    root = pathlib.Path(workdir)
    store = load_frozen(root / "store_frozen.jsonl")
    if not len(store):
        failures = _rows(root / "parse_failures.jsonl")
        return empty_store_reason(tally(_events(root / "log.jsonl", "counterfactual"), failures))
    base = {e["task_id"]: e["solved"] for e in _events(root / "eval" / "base" / "log.jsonl",
                                                        "task_end")}
    found = []
    for run in sorted(p for p in (root / "eval").glob("*") if p.name != "base"):
        solved = {e["task_id"]: e["solved"] for e in _events(run / "log.jsonl", "task_end")}
        for d in _events(run / "log.jsonl", "decision"):
            rid = (d.get("memory") or {}).get("record_id")
            if not rid or not d.get("changed") or d["task_id"] not in base:
                continue
            mem, alone = solved.get(d["task_id"]), base[d["task_id"]]
            verdict = ("rescued" if mem and not alone else "broken" if alone and not mem else
                       "solved by both" if mem else "failed by both")
            found.append((_VERDICTS.index(verdict), run.name, d, rid, verdict))
    if not found:
        return (f"no evaluation decision used a record to change its draft ({len(store)} "
                "records in the store)")
    _, run, d, rid, verdict = min(found, key=lambda f: f[:2])
    record = next((r for r in store.records if r.record_id == rid), None)
    shown = ("(record not in the store)" if record is None else
             f"  situation: {record.situation[:300]}\n"
             f"  original:  {record.original_action}\n  improved:  {record.improved_action}\n"
             f"  condition: {record.condition or 'none'}")
    outcome = d.get("outcome") or {}
    return (f"a record at work ({len(found)} changed drafts in evaluation; this one from run {run}, "
            f"task {d['task_id']}, decision {d['decision']}):\n"
            f"draft:\n  {d['draft']}\nrecord {rid}:\n{shown}\nrevised action:\n  {d['action']}\n"
            f"checker: {'solved' if outcome.get('success') else 'failed'} "
            f"(utility {outcome.get('utility', 0):.2f}); against the run without memory: "
            f"{verdict}")
