"""What the GPU-host rehearsal showed (launch/rehearse_gpu_host.sh, docs/gpu_host.md "Rehearsal").

    python launch/rehearsal.py WORKDIR [--preflight_status N] [--sweep_status N]

Reads the rehearsal's workdir (the replicas' logs, the URL file, the sweep's output and its
workdirs' ``log.jsonl``) and prints one line per step, ``ok`` or ``FAILED`` with what was seen,
then a JSON summary line (``summary.json`` too); exits 1 when a step failed.
"""
import argparse
import json
import pathlib
import re
import sys

from countermem_jax.backbones import served_urls

SERVED = "openai/gpt-oss-120b"
_REFUSED = re.compile(r"(\S+): the output constraint '([^']+)' is not enforced \(the server "
                      r"refused it")
_POSTS = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')
PHASES = ("construction", "selector_training", "evaluation")


def _events(path: pathlib.Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cell(root: pathlib.Path, backbone: str) -> dict:
    """Per phase of a cell's workdir: ended or not, calls, failed requests by reason."""
    logs = sorted((root / "sweep" / "spider" / f"react_{backbone}").glob("*/log.jsonl"))
    out = {"workdir": str(logs[0].parent) if logs else None, "phases": {}}
    latest: dict = {}   # a process's ledger is shared by its phases: the last count per phase
    for event in _events(logs[0]) if logs else []:
        if event.get("event") == "phase_end" and event.get("phase") in PHASES:
            ledger = event.get("ledger") or {}
            latest.update(ledger.get("failed_requests") or {})
            out["phases"][event["phase"]] = {"calls": sum((ledger.get("calls") or {}).values())}
    for phase, counts in out["phases"].items():
        counts["failed_requests"] = dict(latest.get(phase) or {})
    out["metrics"] = bool(logs) and (logs[0].parent / "metrics.json").is_file()
    return out


def replica(log: pathlib.Path) -> dict:
    """The chat requests a replica's log shows, by HTTP status."""
    statuses: dict = {}
    for status in _POSTS.findall(log.read_text(errors="replace") if log.is_file() else ""):
        statuses[status] = statuses.get(status, 0) + 1
    return statuses


def summarize(root: pathlib.Path, preflight_status: int, sweep_status: int) -> dict:
    """What the rehearsal in ``root`` left: the replicas' requests, the URL file, the preflight's
    verdict, both cells' phases and the constraints each model's server refused."""
    sweep_text = (root / "sweep.txt").read_text(errors="replace") if (
        root / "sweep.txt").is_file() else ""
    refused: dict = {}
    for model, name in _REFUSED.findall(sweep_text):
        refused.setdefault(model, set()).add(name)
    preflight_err = root / "preflight.err"
    in_preflight = sorted({name for _, name in _REFUSED.findall(
        preflight_err.read_text(errors="replace") if preflight_err.is_file() else "")})
    preflight = (root / "preflight.txt").read_text() if (root / "preflight.txt").is_file() else ""
    verdict = re.search(r"\b(NO-GO|GO)\b", preflight)
    killed = root / "killed_during"
    return {"killed_during": killed.read_text().strip() if killed.is_file() else None,
            "replica_a": replica(root / "replica_a.log"),
            "replica_b": replica(root / "replica_b.log"),
            "url_file": (root / "vllm_urls.txt").read_text().strip()
            if (root / "vllm_urls.txt").is_file() else "",
            "preflight": {"status": preflight_status, "verdict": verdict.group(1) if verdict
                          else None},
            "sweep_status": sweep_status, "served": cell(root, "gptoss"),
            "hosted": cell(root, "api"),
            "refused": {m: sorted(n) for m, n in refused.items()},
            "refused_in_preflight": in_preflight}


def checks(s: dict) -> list[tuple[str, bool, str]]:
    """(step, passed, what was seen) for each step of the rehearsal."""
    served, hosted = s["served"], s["hosted"]
    try:
        listed = served_urls.parse(s["url_file"].encode(), pathlib.Path("vllm_urls.txt"))
        url_ok = len(listed.urls) == 1 and listed.sequences == 1
    except served_urls.UrlFileError:
        url_ok = False
    overlong = sum(p["failed_requests"].get("context_length", 0)
                   for p in served["phases"].values())
    other_failed = {r: n for p in served["phases"].values()
                    for r, n in p["failed_requests"].items() if r != "context_length"}
    hosted_refused = s["refused"].get("gemini-3.1-flash-lite", [])
    return [
        ("serve: the URL file in serve_vllm.sh's format", url_ok, s["url_file"] or "(none)"),
        ("preflight ran and gave a verdict", s["preflight"]["verdict"] is not None,
         f"{s['preflight']['verdict']} (exit status {s['preflight']['status']})"),
        ("sweep: every run finished", s["sweep_status"] == 0,
         f"exit status {s['sweep_status']}"),
        ("served cell: build, train, evaluate", set(served["phases"]) == set(PHASES)
         and served["metrics"], f"phases {sorted(served['phases'])}, metrics.json "
                                f"{served['metrics']}"),
        ("hosted-style cell: build, train, evaluate", set(hosted["phases"]) == set(PHASES)
         and hosted["metrics"], f"phases {sorted(hosted['phases'])}"),
        ("replica killed mid-phase and restarted on another port, used by the phase",
         s["killed_during"] in PHASES and sum(s["replica_b"].values()) > 0,
         f"killed during {s['killed_during']}; requests by status: replica A "
         f"{s['replica_a']}, replica B {s['replica_b']}"),
        ("over-long prompts: failed requests (context_length), the phases went on",
         overlong > 0 and set(served["phases"]) == set(PHASES),
         f"{overlong} context_length; other failed requests {other_failed or 'none'}"),
        ("refused constraints, per template", bool(s["refused"].get(SERVED))
         and hosted_refused == ["distilled_record"],
         f"llama.cpp refused {s['refused'].get(SERVED, [])} in the sweep, "
         f"{s['refused_in_preflight']} in the preflight (each said once); the hosted stand-in "
         f"{hosted_refused} alone"),
    ]


def main(argv=None) -> int:
    """Prints the steps' outcomes and writes ``summary.json``; 1 when a step failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--preflight_status", type=int, default=0)
    parser.add_argument("--sweep_status", type=int, default=0)
    args = parser.parse_args(argv)
    root = pathlib.Path(args.workdir)
    summary = summarize(root, args.preflight_status, args.sweep_status)
    results = checks(summary)
    for step, passed, seen in results:
        print(f"{'ok' if passed else 'FAILED':6} {step}: {seen}")
    summary["checks"] = {step: passed for step, passed, _ in results}
    (root / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({"passed": sum(p for _, p, _ in results), "of": len(results)}))
    return 0 if all(p for _, p, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
