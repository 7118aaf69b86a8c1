"""Upper bounds on the LLM requests a variant study makes, from its config alone (no model, no
data): what docs/studies.md quotes as the paper-size cost on a GPU host.

Per task attempt the agent makes at most one draft, one revision with a record (or memory
block) and ``memory.top_k`` condition judgements; Reflexion adds a reflection after each failed
attempt but the last. Construction adds, per expanded failed decision
(``construction.max_expanded_failures`` per task), one call for the K alternatives and one
distillation. Selector training runs ``selector.total_decisions`` decisions per seed, each at
most one attempt's calls. Evaluation runs every held-out task once for the base agent (a draft
and, for Reflexion, a reflection per attempt) and once per evaluated seed. What variants share
(build, selector, base run; ``runner.ShareKeys``) is counted once, as the runner makes it once.
"""
from countermem_jax.studies import runner


def _attempt(cfg) -> int:
    """Requests of one attempt with memory: draft, revision, condition judgements."""
    return 2 + cfg.memory.top_k


def _reflections(cfg) -> int:
    return cfg.agent.max_attempts - 1 if cfg.agent.kind == "reflexion" else 0


def phase_requests(cfg) -> dict:
    """Upper bounds per phase for one run config: build, selector, base run, memory runs."""
    attempts = cfg.agent.max_attempts
    build = cfg.splits.n_build * (attempts * _attempt(cfg) + _reflections(cfg)
                                  + 2 * cfg.construction.max_expanded_failures)
    seeds = len(cfg.eval.seeds or cfg.selector.seeds) if cfg.eval.selector == "dqn" else 1
    selector = (cfg.selector.total_decisions * len(cfg.selector.seeds) * _attempt(cfg)
                if cfg.eval.selector == "dqn" else 0)
    base = cfg.splits.n_eval * (attempts + _reflections(cfg))
    memory = cfg.splits.n_eval * seeds * (attempts * _attempt(cfg) + _reflections(cfg))
    if cfg.construction.corrections == "within_task":   # nothing built; K checked per failure
        build = 0
        memory += cfg.splits.n_eval * seeds * cfg.construction.max_expanded_failures
    return {"build": build, "selector": selector, "base_run": base, "memory_runs": memory}


def study_requests(study) -> dict:
    """Upper bounds summed over a variant study's variants, shared phases counted once."""
    seen, total = set(), {"build": 0, "selector": 0, "base_run": 0, "memory_runs": 0}
    for cfg in runner.variant_configs(study).values():
        keys, phases = runner.ShareKeys.of(cfg), phase_requests(cfg)
        for phase, key in (("build", keys.build), ("selector", keys.selector),
                           ("base_run", keys.base_run)):
            if (phase, key) not in seen:
                seen.add((phase, key))
                total[phase] += phases[phase]
        total["memory_runs"] += phases["memory_runs"]
    total["total"] = sum(total.values())
    return total


def grid_requests(study) -> dict:
    """``study_requests`` per (benchmark, agent) setting of a four-domain study, and the sum."""
    from countermem_jax.studies import grid
    per = {f"{b}/{a}": study_requests(sub)["total"]
           for (b, a), sub in grid.setting_configs(study).items()}
    return {"settings": per, "total": sum(per.values())}
