"""The evaluation protocol (paper §4, Appendix D): how tasks are split, how results are measured,
summarised and traced, and how config files are loaded.

  splits.py           construction / training / evaluation splits and their leakage guards (App. D.2)
  metrics.py          success rates, rescued and broken tasks, costs (§4.4)
  intervals.py        confidence intervals
  summaries.py        per-domain and four-domain summaries (§4.4)
  construction_tally.py  what construction's counterfactual checks came to (Modules I–II)
  provenance.py       seeds, config, hashes and code version of every figure
  record_at_work.py   one evaluation task where a record changed the draft, or why none did
  analysis.py         loading a trained selector for analysis
  config_files.py     config files by path (``FILE.py:ARG``); the values live in configs/

Imports the method and the domains (it measures them); never baselines, phases, drivers or binaries.
"""
