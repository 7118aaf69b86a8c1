"""§4.4 summaries: domain means, four-domain (equal domain weight) and 12-benchmark (equal
benchmark weight), checked against the paper's own Appendix figures."""
import json
import math
import subprocess
import sys

import pytest

from countermem_jax.protocol import summaries
from countermem_jax.protocol.summaries import Estimate

# Table "Values in Figure fig:domain": score gain ReAct / Reflexion per benchmark.
GAINS = {"minif2f": (31.5, 15.8), "proofnet": (24.2, 12.1), "amber": (27.4, 9.9),
         "swebench": (21.4, 8.4), "bugsinpy": (14.4, 3.8), "dafnybench": (11.2, 5.2),
         "vericoding_dafny": (7.8, 3.4), "vericoding_verus": (9.6, 4.8),
         "spider": (23.6, 13.8), "bird": (16.8, 9.2), "smtlib": (11.3, 5.2), "satlib": (8.2, 2.5)}


@pytest.mark.parametrize("agent,four_domain", [(0, 18.5), (1, 8.175)])
def test_four_domain_summary_reproduces_the_paper(agent, four_domain):
    s = summaries.summarise({b: Estimate(v[agent], 0.0) for b, v in GAINS.items()})
    assert s["four_domain"].value == pytest.approx(four_domain)
    assert s["domains"]["Math"].value == pytest.approx(
        sum(GAINS[b][agent] for b in ("minif2f", "proofnet", "amber")) / 3)


def test_twelve_benchmark_summary_weights_benchmarks_equally():
    react = summaries.summarise({b: Estimate(v[0], 0.0) for b, v in GAINS.items()})
    refl = summaries.summarise({b: Estimate(v[1], 0.0) for b, v in GAINS.items()})
    # "The mean over all 24 score changes is 12.5625 pp."
    assert (react["twelve_benchmark"].value + refl["twelve_benchmark"].value) / 2 == \
        pytest.approx(12.5625)


def test_missing_benchmarks_are_named_not_averaged_away():
    s = summaries.summarise({"spider": Estimate(50, 5), "minif2f": Estimate(20, 4)})
    assert s["twelve_benchmark"] is None and "bird" in s["twelve_benchmark_missing"]
    assert s["four_domain"] is None and s["four_domain_missing"] == ["Coding", "SAT"]
    assert s["domains"]["Text-to-SQL"] == Estimate(50, 5)


def test_standard_errors():
    assert summaries.score(8, 20) == Estimate(40.0, 100 * math.sqrt(0.4 * 0.6 / 20))
    g = summaries.paired_gain(rescued=3, broken=1, n=20)
    assert g.value == pytest.approx(10.0)
    assert g.se == pytest.approx(100 * math.sqrt((4 / 20 - 0.01) / 20))
    assert summaries.mean([Estimate(10, 3), Estimate(20, 4)]) == Estimate(15, 2.5)


def test_cli_reads_metrics_files(tmp_path):
    paths = []
    for bench, (b, m) in {"spider": (8, 10), "satlib": (5, 6)}.items():
        path = tmp_path / f"{bench}.json"
        path.write_text(json.dumps({
            "agent": "react", "benchmark": bench, "base": {"solved": b, "tasks": 20},
            "countermem": {"solved": m, "tasks": 20},
            "paired": {"rescued": m - b, "broken": 0, "paired_tasks": 20}}))
        paths.append(str(path))
    out = subprocess.run([sys.executable, "-m", "countermem_jax.protocol.summaries", *paths],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Text-to-SQL" in out.stdout and " 40.00 ±" in out.stdout and " 10.00 ±" in out.stdout
    assert "four domain missing: Math, Coding" in out.stdout
