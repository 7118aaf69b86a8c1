"""Metrics of paper §4.4 and Appendix D.6, each with its stated denominator, from a run log.

  score                   100 · solved / tasks, per benchmark and per domain
  tokens                  total task-run tokens (evaluation phase)
  calls_per_solved        world-model calls (counterfactual checks included) / solved tasks
  failures_per_solved     failed evaluated attempts / solved tasks
  retrieval_coverage      retrieval opportunities with ≥ 1 eligible record returned / opportunities
  harmful_use_rate        selected record uses labelled harmful (reuse label −1) / selected uses
  rescued, broken         paired tasks: failed without memory and solved with it / the reverse
"""
import collections


def run_metrics(task_ends: list[dict], decisions: list[dict]) -> dict:
    n = len(task_ends)
    solved = sum(e["solved"] for e in task_ends)
    calls = sum(e["calls"] for e in task_ends)
    failures = sum(e["failures"] for e in task_ends)
    out = {
        "tasks": n, "solved": solved, "score": 100.0 * solved / n if n else 0.0,
        "tokens": sum(e["tokens"] for e in task_ends), "world_model_calls": calls,
        "failed_attempts": failures,
        "calls_per_solved": calls / solved if solved else None,
        "failures_per_solved": failures / solved if solved else None,
    }
    by_bench = collections.defaultdict(list)
    for e in task_ends:
        by_bench[(e.get("domain", "?"), e.get("benchmark", "?"))].append(e["solved"])
    out["score_by_benchmark"] = {f"{d}/{b}": 100.0 * sum(v) / len(v) for (d, b), v in by_bench.items()}
    domains = collections.defaultdict(list)
    for (d, _), v in by_bench.items():
        domains[d].append(100.0 * sum(v) / len(v))
    out["score_by_domain"] = {d: sum(v) / len(v) for d, v in domains.items()}
    memory = [d["memory"] for d in decisions if d.get("memory")]
    if memory:
        opportunities = len(memory)
        covered = sum(bool(m.get("covered")) for m in memory)
        used = [d for d in decisions if d.get("memory", {}).get("record_id")]
        harmful = sum(1 for d in used if (d.get("reuse") or {}).get("label") == -1)
        out.update({"retrieval_opportunities": opportunities,
                    "retrieval_coverage": covered / opportunities,
                    "selected_uses": len(used),
                    "harmful_uses": harmful,
                    "harmful_use_rate": harmful / len(used) if used else None,
                    "changed_by_memory": sum(bool(d.get("changed")) for d in used)})
        # condition verdicts per decision (memory_use: memory.conditions), summed over decisions
        verdicts = [m["conditions"] for m in memory if m.get("conditions")]
        out["condition_verdicts"] = {k: sum(v.get(k, 0) for v in verdicts) for k in (
            "compatible", "incompatible", "undecided", "judged_by_llm", "judge_calls",
            "judge_tokens")}
    return out


def paired(base_ends: list[dict], mem_ends: list[dict]) -> dict:
    base = {e["task_id"]: e["solved"] for e in base_ends}
    mem = {e["task_id"]: e["solved"] for e in mem_ends}
    common = sorted(set(base) & set(mem))
    rescued = sum(1 for t in common if mem[t] and not base[t])
    broken = sum(1 for t in common if base[t] and not mem[t])
    return {"paired_tasks": len(common), "rescued": rescued, "broken": broken,
            "net": rescued - broken}


def _fmt(v):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def comparison_table(base: dict, mem: dict, pair: dict, agent: str) -> str:
    rows = [("score (0-100)", "score"), ("solved / tasks", None), ("task-run tokens", "tokens"),
            ("world-model calls", "world_model_calls"), ("calls per solved task", "calls_per_solved"),
            ("failed attempts per solved", "failures_per_solved"),
            ("retrieval coverage", "retrieval_coverage"), ("selected record uses", "selected_uses"),
            ("harmful use rate", "harmful_use_rate")]
    head = f"{'metric':<30}{agent:>14}{agent + '+CounterMem':>24}"
    lines = [head, "-" * len(head)]
    for label, key in rows:
        if key is None:
            b, m = f"{base['solved']}/{base['tasks']}", f"{mem['solved']}/{mem['tasks']}"
        else:
            b, m = _fmt(base.get(key)), _fmt(mem.get(key))
        lines.append(f"{label:<30}{b:>14}{m:>24}")
    lines.append(f"paired tasks {pair['paired_tasks']}: rescued {pair['rescued']}, broken "
                 f"{pair['broken']}, net {pair['net']:+d}")
    return "\n".join(lines)
