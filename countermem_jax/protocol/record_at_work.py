"""A record at work: after the three phases, one evaluation task where a record changed the
draft (paper §3.4), with the run without memory as its pair (rescued or broken); or, for an
empty store, why construction verified nothing (Modules I–II). What the CPU quickstart prints
last (``inspect_store --workdir``).
"""
import pathlib

from countermem_jax.method.memory.persistence import load_frozen
from countermem_jax.protocol.construction_tally import empty_store_reason, standing, tally
from countermem_jax.runtime.runlog import RunLog


def _rows(path: pathlib.Path) -> list[dict]:
    """The whole events of a log file, lines of an unfinished write left out ([] when it does
    not exist)."""
    return RunLog(path).events() if path.is_file() else []


def _events(path: pathlib.Path, event: str) -> list[dict]:
    return [r for r in _rows(path) if r.get("event") == event]


# Paired verdicts, best shown first: a rescue is the method at work, a break its risk.
_VERDICTS = ("rescued", "broken", "solved by both", "failed by both")


def record_at_work(workdir) -> str:
    """One evaluation decision where the selector gave the model a record and the action
    changed, preferring a rescued task, then a broken one, and a verdict against a reference
    result that is not empty (which any empty result would match); or why there is none."""
    root = pathlib.Path(workdir)
    store = load_frozen(root / "store_frozen.jsonl")
    if not len(store):
        failures = _rows(root / "parse_failures.jsonl")
        return empty_store_reason(tally(standing(_rows(root / "log.jsonl")), failures))
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
            empty = bool((d.get("outcome") or {}).get("reference_empty"))
            found.append((_VERDICTS.index(verdict), empty, run.name, d, rid, verdict))
    if not found:
        return (f"no evaluation decision used a record to change its draft ({len(store)} "
                "records in the store)")
    _, empty, run, d, rid, verdict = min(found, key=lambda f: f[:3])
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
            f"(utility {outcome.get('utility', 0):.2f}"
            f"{'; the reference result is empty' if empty else ''}); against the run without "
            f"memory: {verdict}")
