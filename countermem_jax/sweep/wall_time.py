"""The dry run's expected wall time: upper bounds on each phase run's LLM calls
(``studies/cost.py``), their completion tokens, and the hours the hosts' servers need for them
at a given throughput (docs/sweeps.md, "Before committing a cluster").

A run's calls are its phase's bound for its config (an evaluation adds its base run), each
charged ``tokens_per_call`` completion tokens (default ``agent.max_tokens``, a bound).
"""
import dataclasses

from countermem_jax.studies import cost
from countermem_jax.sweep import execute


@dataclasses.dataclass
class Tally:
    """Calls and completion tokens of the runs on the hosts' servers and on hosted APIs, and
    the methods whose calls have no bound (left out)."""
    served_calls: int = 0
    served_tokens: int = 0
    hosted_calls: int = 0
    hosted_tokens: int = 0
    unbounded: set = dataclasses.field(default_factory=set)


def run_calls(run, first_evaluation: bool) -> int:
    """The bound on one phase run's LLM calls (the module docstring)."""
    cfg = run.config
    phases = cost.phase_requests(cfg)
    if run.phase == "build_memory":
        return phases["build"]
    if run.phase == "train_selector":
        return phases["selector"]
    memory = phases["memory_runs"]
    if cfg.method == "countermem" and cfg.eval.selector == "dqn":   # this run's one seed
        memory = cfg.splits.n_eval * cost.task_requests(cfg)["memory"]
    return memory + (phases["base_run"] if first_evaluation else 0)


def tally(runs, tokens_per_call: int = 0) -> Tally:
    """The calls and tokens of ``runs`` (``graph.PhaseRun``), served and hosted apart."""
    out, evaluated = Tally(), set()
    for run in runs:
        if run.config.backbone.kind != "openai":
            continue
        first = run.phase == "evaluate" and run.workdir not in evaluated
        try:
            calls = run_calls(run, first)
        except ValueError:
            out.unbounded.add(run.config.method)
            continue
        if run.phase == "evaluate":
            evaluated.add(run.workdir)
        tokens = calls * (tokens_per_call or int(run.config.agent.max_tokens))
        if execute.uses_hosted_api(run.config):
            out.hosted_calls, out.hosted_tokens = out.hosted_calls + calls, out.hosted_tokens + tokens
        else:
            out.served_calls, out.served_tokens = out.served_calls + calls, out.served_tokens + tokens
    return out


def describe(runs, tokens_per_s: float = 0.0, tokens_per_call: int = 0) -> str:
    """The dry run's lines on calls, tokens and, given ``tokens_per_s``, hours."""
    t = tally(runs, tokens_per_call)
    per = f"{tokens_per_call:,} completion tokens each" if tokens_per_call else \
        "agent.max_tokens completion tokens each"
    lines = [f"LLM calls (upper bounds, studies/cost.py; {per}): on the hosts' servers "
             f"{t.served_calls:,} calls, {t.served_tokens:,} tokens; on hosted APIs "
             f"{t.hosted_calls:,} calls, {t.hosted_tokens:,} tokens"]
    if t.unbounded:
        lines.append(f"  not counted (no request bound): {', '.join(sorted(t.unbounded))}")
    if tokens_per_s > 0:
        hours = t.served_tokens / tokens_per_s / 3600
        lines.append(f"expected wall time on the hosts' servers at {tokens_per_s:,.0f} tokens/s: "
                     f"at most {hours:,.1f} h ({hours / 24:,.1f} days), the servers kept full")
    else:
        lines.append("expected wall time: pass --tokens_per_s (the preflight measures it) to "
                     "turn the tokens into hours")
    return "\n".join(lines)
