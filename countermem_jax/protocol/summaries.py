"""Summaries of paper §4.4: per-domain scores (mean of the domain's benchmarks), the four-domain
summary (Math, Coding, Text-to-SQL, SAT with equal domain weights, the main table's) and the
12-benchmark summary (equal benchmark weights), each with a standard error.

A benchmark's score is 100·solved/n with binomial standard error 100·√(p(1−p)/n); a gain
(CounterMem − base) on the same tasks has the paired standard error from its rescued and broken
counts. Means of independent benchmarks combine errors as √(Σ se²)/k. A summary over a set with a
missing benchmark or domain is not computed (None) and names what is missing.

    python -m countermem_jax.protocol.summaries runs/*/metrics.json
prints, per agent, base / CounterMem / gain for every domain and both summaries.
"""
import dataclasses
import json
import math
import pathlib
import sys

from countermem_jax.domains import registry


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
