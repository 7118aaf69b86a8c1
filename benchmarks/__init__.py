"""Benchmarks beside the library, not in its wheel (as CleanRL keeps its benchmarks beside the
code); each runs from the repository root as ``python -m benchmarks.<folder>.<name>``.

  speed/      what a run costs, against a baseline timed in the same run: retrieval, selector
              training, the checkers, the HTTP client, the pipeline at many tasks in flight,
              selector waves, the tokens of the record's replay (``docs/speed.md``)
  security/   hostile catalogues: actions, paths, model replies and 1 MB inputs that no checker,
              binary or parser may be beaten by (``docs/world_models.md#threat-model``); the
              tests run the same cases
  tuning/     probes of the CPU model on the tuning pool (``protocol/pools.py``): construction
              yield, the SQL operators' reach (``docs/cpu_models.md``)
  common.py   timing, optional extras and the ``result: {json}`` last line they all print
  scripted_sql.py  the deterministic SQL benchmark and its scripted model served over HTTP

They may use the test doubles of ``countermem_jax/testing`` and time ``evaluators/`` directly.
"""
