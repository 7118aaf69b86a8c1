"""Summaries of paper §4.4: per-domain scores (mean of the domain's benchmarks), the four-domain
summary (Math, Coding, Text-to-SQL, SAT with equal domain weights, the main table's) and the
12-benchmark summary (equal benchmark weights), each with a standard error.

    python -m countermem_jax.protocol.summaries runs/*/metrics.json
"""
import dataclasses
import json
import math
import pathlib
import sys

import numpy as np

from countermem_jax.domains import registry
from countermem_jax.protocol import intervals


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A score or gain in points (0–100 scale) with its standard error, printed ``value ± se``."""
    value: float
    se: float

    def __str__(self):
        return f"{self.value:6.2f} ± {self.se:4.2f}"


def score(solved: int, n: int) -> Estimate:
    """A benchmark score 100·solved/n with its binomial standard error."""
    p = solved / n
    return Estimate(100.0 * p, 100.0 * math.sqrt(p * (1 - p) / n))


def paired_gain(rescued: int, broken: int, n: int) -> Estimate:
    """Mean of per-task differences in {−1, 0, +1} (memory minus base), in points."""
    d = (rescued - broken) / n
    var = max((rescued + broken) / n - d * d, 0.0) / n
    return Estimate(100.0 * d, 100.0 * math.sqrt(var))


def grouped_mean(values, groups) -> Estimate:
    """The mean of per-task values (points) with its between-group standard error:
    √(Σ_g (S_g − mean·n_g)²) / N over the groups' sums S_g and sizes n_g. With every task its own
    group this is the binomial error of ``score`` (and of ``paired_gain`` for differences)."""
    values = np.asarray(values, np.float64)
    codes, g = intervals.group_codes(groups, values.size)
    sums = np.bincount(codes, weights=values, minlength=g)
    sizes = np.bincount(codes, minlength=g)
    m = float(values.mean())
    return Estimate(m, float(np.sqrt(np.sum((sums - m * sizes) ** 2)) / values.size))


def mean(estimates: list[Estimate]) -> Estimate:
    """Unweighted mean of independent estimates; the error is √(Σ se²)/k.

    Used for a domain (its benchmarks) and for the four-domain summary (its domains), which is
    how §4.4 weights them: equal weight per benchmark inside a domain, per domain above it.
    """
    k = len(estimates)
    return Estimate(sum(e.value for e in estimates) / k,
                    math.sqrt(sum(e.se ** 2 for e in estimates)) / k)


def summarise(per_benchmark: dict[str, Estimate]) -> dict:
    """Domain means, the four-domain and the 12-benchmark summaries over the paper's settings."""
    settings = registry.paper_settings()
    domains = {}
    for d in registry.PAPER_DOMAINS:
        names = [b.name for b in settings if b.paper_domain == d]
        have = [per_benchmark[n] for n in names if n in per_benchmark]
        domains[d] = mean(have) if have else None
    missing_domains = [d for d in registry.FOUR_DOMAINS if domains[d] is None]
    missing_benchmarks = [b.name for b in settings if b.name not in per_benchmark]
    return {
        "domains": domains,
        "four_domain": None if missing_domains else mean([domains[d] for d in registry.FOUR_DOMAINS]),
        "four_domain_missing": missing_domains,
        "twelve_benchmark": None if missing_benchmarks else
        mean([per_benchmark[b.name] for b in settings]),
        "twelve_benchmark_missing": missing_benchmarks,
    }


def from_metrics(paths) -> dict[str, dict[str, dict[str, Estimate]]]:
    """agent -> {"base" | "countermem" | "gain": {benchmark: Estimate}} from metrics.json files
    (one per workdir; a later file for the same agent and benchmark replaces an earlier one)."""
    out = {}
    for path in paths:
        m = json.loads(pathlib.Path(path).read_text())
        runs = out.setdefault(m["agent"], {"base": {}, "countermem": {}, "gain": {}})
        name = m["benchmark"]
        per_task = m.get("aggregate", {}).get("per_task")
        if per_task and per_task.get("groups"):
            base = np.asarray(per_task["base"], np.float64)
            treated = np.asarray(per_task["treated"], np.float64).mean(axis=0)  # over seeds
            for run, values in (("base", base), ("countermem", treated),
                                ("gain", treated - base)):
                runs[run][name] = grouped_mean(values, per_task["groups"])
            continue
        for run in ("base", "countermem"):
            runs[run][name] = score(m[run]["solved"], m[run]["tasks"])
        p = m["paired"]
        runs["gain"][name] = paired_gain(p["rescued"], p["broken"], p["paired_tasks"])
    return out


def format_summary(agent: str, runs: dict) -> str:
    """One agent's block: base, CounterMem and gain per domain, then both summaries.

    A summary that cannot be computed shows '—' and a line naming the missing benchmarks or
    domains, rather than a mean over whatever happened to be run.
    """
    sums = {run: summarise(values) for run, values in runs.items()}
    lines = [f"{agent}: {'base':>15} {'CounterMem':>15} {'gain (pp)':>15}"]
    rows = [(d, [sums[r]["domains"][d] for r in ("base", "countermem", "gain")])
            for d in registry.PAPER_DOMAINS]
    rows.append(("four-domain", [sums[r]["four_domain"] for r in ("base", "countermem", "gain")]))
    rows.append(("12-benchmark",
                 [sums[r]["twelve_benchmark"] for r in ("base", "countermem", "gain")]))
    for label, values in rows:
        lines.append(f"  {label:13}" + "".join(f" {str(v) if v else '—':>15}" for v in values))
    for key in ("four_domain_missing", "twelve_benchmark_missing"):
        if sums["base"][key]:
            lines.append(f"  {key.replace('_', ' ')}: {', '.join(sums['base'][key])}")
    return "\n".join(lines)


def main(argv) -> int:
    """CLI entry: prints one block per agent for the metrics files given; returns the exit code.

    Exit 2 on missing arguments, 1 with a one-line message when a file cannot be read.
    """
    if len(argv) < 2:
        print("usage: python -m countermem_jax.protocol.summaries WORKDIR/metrics.json ...")
        return 2
    try:
        by_agent = from_metrics(argv[1:])
    except (OSError, KeyError, json.JSONDecodeError) as err:
        print(f"cannot read metrics: {err!r}")
        return 1
    for agent, runs in sorted(by_agent.items()):
        print(format_summary(agent, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
