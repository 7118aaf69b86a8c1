"""Studies of the paper (§5.2(d), §6.1, §6.2, Appendix D.4, E.3, and two beyond it) as configs
that one runner executes: ``python -m countermem_jax.study --config=configs/studies/<x>.py
--workdir=DIR``.

A study config (``configs/studies/<study>.py``, an ``ml_collections`` ConfigDict) holds
  ``study``      the study's name (``components``, ``retrieval``, ``condition_removal``,
                 ``retention``, ``harm``, ``selectors``, ...);
  ``base``       a complete per-run config (``configs/default.py`` and its overrides);
  ``variants``   {variant name: {"label": str, "overrides": {dotted config path: value}}}, each
                 variant's run config being ``base`` with its overrides applied;
  ``reference``  the variant score changes are measured against ("" = the memory-free base run).
The runner (``countermem_jax.studies.runner``) runs every variant's three phases into
``DIR/<variant>/`` (a complete workdir that ``evaluate``/``report`` can read on its own). Variants
whose build_memory fingerprint is equal share one build, those whose train_selector fingerprint is
also equal share one trained selector, and variants with equal data/splits/agent/backbone share the
memory-free base run: the shared files are copied from the first variant that made them (named in
``shared_from``), so an evaluation-only intervention (``eval.*`` fields) never rebuilds a store.
Finished phases are skipped, so a killed study resumes.

``DIR/study.json`` — the contract the report side reads (schema "countermem-study/1")::

  {
   "schema": "countermem-study/1",
   "study": "retrieval",                       # name from the config
   "title": "Retrieval interventions",          # human title
   "paper": "§6.2, Fig. 4(c,d); App. D.4",      # where the paper shows it
   "config": "configs/studies/retrieval.py",    # the config file given to the runner
   "command": "python -m countermem_jax.study --config=... --workdir=...",
   "code_version": "<git describe --always --dirty>",
   "benchmark": "spider", "agent": "react",     # agent kind of the base config
   "backbone": "<backbone model identity>",
   "eval_task_ids": ["...", ...],               # the held-out tasks every variant ran (sorted)
   "reference": "none" | "base",                # what "score_change" is measured against
   "variants": {
     "<variant>": {
       "label": "shuffled",                     # legend label
       "overrides": {"eval.retrieval_intervention": "shuffled"},
       "workdir": "DIR/<variant>",
       "shared_from": {"build": "<variant>"|null, "selector": "<variant>"|null,
                       "base_run": "<variant>"|null},   # null = made in this variant's own dir
       "store": {"hash": "<sha256>",            # store_frozen.sha256 (integrity, per build)
                 "build_hash": "<sha256>",      # without creation times and the store's random
                                                # id: equal for equal builds on any host
                 "records": 12, "capacity": 200, "retention": "utility",
                 "evictions": 0},           # evictions > 0: the capacity bound (retention study)
       "selector": "dqn" | "always_skip" | "always_top1" | "relevance_threshold",
       "seeds": ["0", ...] | ["fixed"],         # one evaluation run per selector seed
       "per_task": {"base": {"<task_id>": 0|1}, "<seed>": {"<task_id>": 0|1}},
       "task_groups": {"<task_id>": "<group>"},  # reference groups the intervals draw whole
                                                # (absent where evaluation recorded none)
       "score": <summary>,                      # 100·solved over [seeds × tasks]
       "score_vs_base": <summary>,              # per-task paired difference to the base run (pp)
       "score_change": <summary>,               # paired difference to the study's reference (pp)
       "metrics": {                             # means over seeds (evaluate's metrics)
         "tasks", "solved", "score", "tokens", "world_model_calls", "failed_attempts",
         "calls_per_solved", "failures_per_solved",            # App. D.6: per solved task
         "retrieval_opportunities", "retrieval_coverage",       # per retrieval opportunity
         "selected_uses", "harmful_uses", "harmful_use_rate",   # worse than the memory-free
         "paired_uses", "unpaired_uses",        # run at the same decision, per paired use
         "reuse_label_harmful", "reuse_label_harmful_rate",     # Eq. 6's label −1
         "funnel": {...metrics.FUNNEL steps...},  # where memory is lost, summed over seeds
         "retrieved_records", "action_changes", "harmful_changes",
         "action_changes_per_retrieved", "harmful_changes_per_retrieved",  # per retrieved record
         "draft_paired_uses", "harmful_vs_draft", "helpful_vs_draft",
         "harmful_vs_draft_rate"},              # study 10: per selected use paired with the draft
       "base_metrics": {...same keys, the memory-free base run...},
       "paired": {"<seed>": {"paired_tasks", "rescued", "broken", "net"}},
       "per_task_counts": {"base"|"<seed>": {"<task_id>": [calls, solved, retrieved_records,
                           action_changes, harmful_changes]}},   # Fig. 4 over four domains
       "by_task_kind": {"ordinary": {metrics, "n_tasks"},
                        "look_alike": {metrics, "n_tasks"}}   # condition_removal only
     }, ...
   },
   "columns": [{"header": "changes/retrieved",       # the printed table's extra columns
                "value": "metrics.action_changes_per_retrieved"}, ...],
   "figures": [                                 # the study's own panels, in paper order
     {"panel": "a", "title": "Score gain over the base agent", "kind": "bar",
      "variants": ["full", "cf_without_wm", ...], "value": "score_vs_base",
      "unit": "pp"}, ...]                       # value: a per-variant key holding a <summary>,
                                                # or a dotted key ("metrics.<key>") of a number;
                                                # kind "grouped_bar" has "values": [key, ...]
                                                # (one bar per key and variant) instead; an
                                                # optional "baseline" key is drawn beside each
                                                # bar (e.g. base_metrics.calls_per_solved)
  }

The studies: ``components`` (§6.1: full, cf_without_wm, wm_without_cf), ``retrieval`` (§6.2:
none, random, shuffled, matched; reference "none"), ``condition_removal`` (App. E.3:
with_condition, without_condition; ``by_task_kind``), ``retention`` (§5.2(d): utility,
similarity, recency, random at a binding capacity), ``harm`` (study 10: dqn, always_top1; the
``*_vs_draft`` metrics), ``selectors`` (study 11: dqn, always_skip, always_top1,
relevance_threshold).

``<summary>`` is ``intervals.summarize``'s dict: {"mean", "std" (over seeds, null with one), "ci95":
[lo, hi] (two-level bootstrap over seeds and reference groups, or tasks where none are recorded),
"per_seed", "seeds", "tasks", "groups", "method"}. A rate whose denominator is zero is null. Numbers
are plain JSON floats; nothing in the file needs the run directories to be read again, but every
value can be recomputed from them.
A config with a ``grid`` section runs such a study per benchmark and agent (``studies.grid``:
§6 over Table 1's four domains) and writes the "countermem-study-domains/1" record.
"""
SCHEMA = "countermem-study/1"
