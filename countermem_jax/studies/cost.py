"""Upper bounds on the LLM calls a study makes, from its config alone (no model, no data): what
docs/studies.md quotes as the paper-size cost on a GPU host. This module bounds one run config's
phases and the variant and four-domain studies; ``protocol_cost`` the protocol studies.
"""
from countermem_jax.studies import runner

PHASES = ("build", "selector", "base_run", "memory_runs")
# Calls after each construction run, besides the run itself (baselines/reasoningbank.py; ExpeL:
# a comparison of the run and the tail of the success batch; Voyager: one skill description).
_LEARN = {"reasoningbank": 2, "reasoningbank_verified": 1, "expel": 2, "voyager": 1}


def _method(cfg) -> str:
    return cfg.get("method", "countermem")


def _attempt(cfg) -> int:
    """Calls of one attempt with memory: draft, revision, condition judgements (CounterMem);
    draft, archival search and revision (MemGPT); draft, K candidates and the judge
    (Best-of-N); or draft and one revision with the retrieved block (another baseline)."""
    method = _method(cfg)
    if method == "countermem":
        return 2 + cfg.memory.top_k
    if method == "best_of_n":
        from countermem_jax.baselines import config as baseline_config
        return 2 + int(baseline_config.section(cfg, method)["k"])
    return 3 if method == "memgpt" else 2


def _reflections(cfg) -> int:
    return cfg.agent.max_attempts - 1 if cfg.agent.kind == "reflexion" else 0


def _expansions(cfg) -> int:
    """Failed decisions of one task that construction expands (at most one per attempt)."""
    return min(cfg.construction.max_expanded_failures, cfg.agent.max_attempts)


def distillations(cfg) -> int:
    """DISTIL_RECORD calls of one construction task, hence its most new records: one per
    verified alternative (verified mode), one per expansion (unverified advice), none
    (within-task checks)."""
    c = cfg.construction
    if c.corrections == "verified":
        return min(_expansions(cfg) * c.k, c.verification_budget)
    return _expansions(cfg) if c.corrections == "unverified_advice" else 0


def task_requests(cfg) -> dict:
    """Upper bounds per task of ``cfg``'s method: a construction task (its run and what is
    learnt from it), a base-agent task and a task of one memory run."""
    attempts, method = cfg.agent.max_attempts, _method(cfg)
    run = attempts * _attempt(cfg) + _reflections(cfg)
    base = attempts + _reflections(cfg)
    if method == "none":
        return {"build": 0, "base": base, "memory": 0}
    if method == "countermem":
        build = run + _expansions(cfg) + distillations(cfg)
        memory = run
        if cfg.construction.corrections == "within_task":   # nothing built; K checked per failure
            build, memory = 0, run + _expansions(cfg)
    elif method == "reasoningbank_matts":
        from countermem_jax.baselines import config as baseline_config
        k = int(baseline_config.section(cfg, method)["matts_k"])
        build, memory = k * (run + 1) + 1, run
    elif method == "best_of_n":   # no memory to build
        build, memory = 0, run
    elif method == "expel":        # gathering runs the base agent
        build, memory = base + _LEARN[method], run
    elif method in _LEARN:
        build, memory = run + _LEARN[method], run
    elif method == "generative_agents":   # per attempt an importance, at most a reflection
        build, memory = run + 3 * attempts, run   # and its importance
    elif method == "memgpt":       # up to max_steps memory-management steps per run
        from countermem_jax.baselines import config as baseline_config
        build, memory = run + int(baseline_config.section(cfg, method)["max_steps"]), run
    else:
        raise ValueError(f"no request bound for method {method!r}")
    return {"build": build, "base": base, "memory": memory}


def memory_run_count(cfg) -> int:
    """Memory runs ``evaluate`` makes: one per evaluated DQN seed, else one (none: zero)."""
    method = _method(cfg)
    if method == "none":
        return 0
    if method == "countermem" and cfg.eval.selector == "dqn":
        return len(cfg.eval.seeds or cfg.selector.seeds)
    return 1


def selector_requests(cfg) -> int:
    """Upper bound of selector training over all seeds (0 without a trained selector)."""
    if _method(cfg) != "countermem" or cfg.eval.selector != "dqn":
        return 0
    s, attempts = cfg.selector, cfg.agent.max_attempts
    last_wave = min(int(s.get("wave_size", 1)), s.total_decisions)
    decisions = s.total_decisions + last_wave * (attempts - 1)
    validations = decisions // s.checkpoint_every + 1
    per_decision = _attempt(cfg) + (cfg.agent.kind == "reflexion")
    per_seed = (decisions * per_decision
                + validations * cfg.splits.n_validation * task_requests(cfg)["memory"])
    return len(s.seeds) * per_seed


def phase_requests(cfg) -> dict:
    """Upper bounds per phase for one run config: build, selector, base run, memory runs."""
    per = task_requests(cfg)
    return {"build": cfg.splits.n_build * per["build"], "selector": selector_requests(cfg),
            "base_run": cfg.splits.n_eval * per["base"],
            "memory_runs": cfg.splits.n_eval * memory_run_count(cfg) * per["memory"]}


def study_requests(study) -> dict:
    """Upper bounds summed over a variant study's variants, shared phases counted once."""
    seen, total = set(), dict.fromkeys(PHASES, 0)
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
