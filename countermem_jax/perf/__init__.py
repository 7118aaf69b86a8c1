"""Speed scripts (named ``perf`` so they are not confused with the benchmark datasets): each
prints ratios against a baseline measured in the same run, and ends with a ``result: {json}``
line."""
