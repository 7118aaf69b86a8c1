"""Speed and cost benchmarks (``docs/speed.md``): each prints ratios against a baseline measured
in the same run, and ends with a ``result: {json}`` line; speed is never asserted in a test."""
