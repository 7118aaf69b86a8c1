"""Helpers of ``launch/smoke_methods_cpu.sh`` (a CPU-model smoke run of every
method through the three binaries on three Spider questions, every LLM call logged).

    python launch/smoke_methods.py manifest FILE [--config=...]   the tiny splits manifest
    python launch/smoke_methods.py summary WORKROOT               one line per method + result

``manifest`` draws the splits the config would draw (Appendix D.2 seeds, reference groups kept
apart) with the smoke sizes and writes {"build", "train", "validation", "eval"} for
``--config.splits.manifest``. ``summary`` reads each method's workdir: the score of the base agent
and of the method (``metrics.json``), the task-run tokens and LLM calls of the method's evaluation
row, and the accounting check: the task ends' tokens and LLM calls summed over every log of the
workdir equal the token ledger's totals recorded in the phases' ``phase_end`` events (a call that
reaches the backbone without being booked on a task run shows up as a difference).
"""
import argparse
import importlib.util
import json
import pathlib
import sys

SIZES = {"build": 3, "train": 2, "validation": 1, "eval": 3}


def _load_config(path: str):
    spec = importlib.util.spec_from_file_location("smoke_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


def draw_manifest(tasks, sizes=SIZES) -> dict:
    """The smoke splits: D.2's seeded draw with a larger construction pool, cut to the sizes
    (construction loses the tasks that share a group with evaluation, so it is drawn larger)."""
    from countermem_jax.protocol import splits as splits_lib
    sp = splits_lib.make_splits(tasks, 4 * sizes["build"], sizes["train"], sizes["validation"],
                                sizes["eval"])
    manifest = {name: [t.task_id for t in getattr(sp, name)][:n] for name, n in sizes.items()}
    splits_lib.from_manifest(tasks, manifest)  # refuses overlaps of ids and reference groups
    return manifest


def _task_ends(workdir: pathlib.Path) -> list[dict]:
    ends = []
    for log in [workdir / "log.jsonl", *sorted(workdir.glob("eval/*/log.jsonl"))]:
        if log.exists():
            ends += [e for e in map(json.loads, log.read_text().splitlines())
                     if e.get("event") == "task_end"]
    return ends


def accounting(workdir: pathlib.Path) -> dict:
    """Task-run tokens / LLM calls summed over the workdir's logs vs the ledgers' totals."""
    ends = _task_ends(workdir)
    ledger_tokens = ledger_calls = cached = 0
    log = workdir / "log.jsonl"
    events = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    for e in events:
        if e.get("event") == "phase_end" and "ledger" in e:
            ledger_tokens += sum(u["total"] for u in e["ledger"]["by_phase"].values())
            ledger_calls += sum(e["ledger"]["calls"].values())
            cached += e["ledger"]["cached_calls"]
    tokens, calls = sum(e["tokens"] for e in ends), sum(e["llm_calls"] for e in ends)
    return {"task_ends": len(ends), "task_tokens": tokens, "task_llm_calls": calls,
            "ledger_tokens": ledger_tokens, "ledger_calls": ledger_calls,
            "ledger_cached_calls": cached,
            "all_logged": tokens == ledger_tokens and calls == ledger_calls}


def method_row(workdir: pathlib.Path, method: str) -> dict:
    row = {"method": method}
    metrics_file = workdir / "metrics.json"
    if not metrics_file.exists():
        return row | {"error": f"no {metrics_file}"}
    m = json.loads(metrics_file.read_text())
    row["base_score"] = m["base"]["score"]
    row["score"] = m["countermem"]["score"] if method != "none" else m["base"]["score"]
    costs = m["evaluation_cost"]
    own = [v for k, v in costs.items() if k != "base"] or [costs["base"]]
    row["eval_tokens"] = sum(c["tokens"] for c in own)
    row["eval_llm_calls"] = sum(c["llm_calls"] for c in own)
    row["base_tokens"] = costs["base"]["tokens"]
    row["base_llm_calls"] = costs["base"]["llm_calls"]
    row["eval_tasks"] = m["base"]["tasks"]
    return row | accounting(workdir)


def summary(workroot: pathlib.Path, methods) -> list[dict]:
    rows = [method_row(workroot / m, m) for m in methods]
    for r in rows:
        if "error" in r:
            print(f"{r['method']:24s} FAILED: {r['error']}")
            continue
        print(f"{r['method']:24s} base {r['base_score']:5.1f}  method {r['score']:5.1f}  "
              f"({r['eval_tasks']} tasks)  eval tokens {r['eval_tokens']:6d}  LLM calls "
              f"{r['eval_llm_calls']:3d}  | all phases: {r['task_llm_calls']} calls / "
              f"{r['task_tokens']} tokens on task runs, ledger {r['ledger_calls']} / "
              f"{r['ledger_tokens']} ({r['ledger_cached_calls']} from cache) "
              f"{'OK' if r['all_logged'] else 'MISMATCH'}")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("manifest")
    m.add_argument("file")
    m.add_argument("--config", default="configs/spider_react_cpu.py")
    s = sub.add_parser("summary")
    s.add_argument("workroot")
    s.add_argument("--methods", default="")
    args = parser.parse_args(argv)
    if args.command == "manifest":
        from countermem_jax import domains
        tasks, _, _ = domains.load_benchmark(_load_config(args.config).data)
        manifest = draw_manifest(tasks)
        pathlib.Path(args.file).write_text(json.dumps(manifest, indent=1))
        print(f"smoke splits {json.dumps({k: len(v) for k, v in manifest.items()})} -> {args.file}")
        return 0
    from countermem_jax import baselines
    methods = args.methods.split(",") if args.methods else list(baselines.METHODS)
    rows = summary(pathlib.Path(args.workroot), methods)
    ok = all("error" not in r and r["all_logged"] for r in rows)
    print("result: " + json.dumps({"ok": ok, "methods": {r["method"]: {
        k: v for k, v in r.items() if k != "method"} for r in rows}}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
