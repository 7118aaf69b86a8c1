"""SAT (SAT Competition / SATLIB, and the generated encoding extra; paper Appendix D.1): the two
SAT domains, their rule edit operators of Module I (paper §3.2, Appendix B.4) and their loaders.

SAT strategy: the action is a solver configuration ('key: value' lines); an edit changes one
setting. SAT encoding: the action is a DIMACS CNF; an edit drops or flips one clause.
"""
from countermem_jax.domains.base import Domain, data_dir, distinct_edits, require

# "" prefers an untagged ``` block to one tagged with an unrelated language.
_SAT_FENCES = ("dimacs", "cnf", "text", "")


def sat_strategy_edits(action: str) -> list[str]:
    """A solver configuration with one setting changed: another solver, assumptions or phases
    dropped, or a conflict budget added."""
    lines = [l for l in action.splitlines() if l.strip()]
    keys = {l.split(":", 1)[0].strip().lower(): i for i, l in enumerate(lines) if ":" in l}
    out = []
    if "solver" in keys:
        current = lines[keys["solver"]].split(":", 1)[1].strip().lower()
        # python-sat solvers with different heuristics: a family one of them stalls on can be
        # easy for another within the same conflict budget.
        for alt in ("cadical195", "glucose4", "maplechrono", "minisat22"):
            if alt != current:
                out.append("\n".join(lines[:keys["solver"]] + [f"solver: {alt}"]
                                     + lines[keys["solver"] + 1:]))
    # Assumptions and phases are hints that can mislead the search: try without each.
    for key in ("assumptions", "phases"):
        if key in keys:
            out.append("\n".join(l for i, l in enumerate(lines) if i != keys[key]))
    # The checker takes the smaller of this and the task's own budget, so this edit changes
    # the run only on tasks that allow more conflicts.
    if "conflict_budget" not in keys:
        out.append("\n".join(lines + ["conflict_budget: 200000"]))
    return distinct_edits(action, out)


def sat_encoding_edits(action: str, limit: int = 6) -> list[str]:
    """A DIMACS encoding with one clause dropped (longest first; header count fixed) or one unit
    clause's literal flipped."""
    lines = action.splitlines()
    clause_idx = [i for i, l in enumerate(lines)
                  if l.strip() and not l.lstrip().startswith(("c", "p", "%"))]
    out = []
    # Half the slots each: dropped clauses (an over-constrained encoding) and flipped units (a
    # fixed variable with the wrong sign).
    for i in sorted(clause_idx, key=lambda i: -len(lines[i].split()))[:limit // 2]:
        kept = lines[:i] + lines[i + 1:]
        out.append("\n".join(_fix_header(kept, -1)))
    for i in [i for i in clause_idx if len(lines[i].split()) == 2][:limit // 2]:
        lit = lines[i].split()[0]
        flipped = lit[1:] if lit.startswith("-") else f"-{lit}"
        out.append("\n".join(lines[:i] + [f"{flipped} 0"] + lines[i + 1:]))
    return distinct_edits(action, out)


def _fix_header(lines, delta):
    """The lines with the ``p cnf`` header's clause count changed by ``delta``."""
    out = []
    for l in lines:
        parts = l.split()
        if len(parts) == 4 and parts[:2] == ["p", "cnf"]:
            l = f"p cnf {parts[2]} {int(parts[3]) + delta}"
        out.append(l)
    return out


SAT_STRATEGY = Domain(
    "sat", "Write the solver configuration as 'key: value' lines in a ``` code block.",
    "A condition may test 'family == <name>' or 'num_vars' style features.",
    lambda task, action: sat_strategy_edits(action), fences=_SAT_FENCES)

SAT_ENCODING = Domain(
    "sat", "Write the DIMACS CNF with its 'c var N NAME' map in a ``` code block.",
    "A condition may test 'problem == <name>' or 'family == <name>'.",
    lambda task, action: sat_encoding_edits(action), fences=_SAT_FENCES)


# --- Loaders ---------------------------------------------------------------------------------

def satlib_tasks(data_cfg):
    """SATLIB / SAT Competition instances listed in the data's manifest (``sat_families``
    selects families)."""
    from evaluators.sat import load_satlib
    root = require(data_dir(data_cfg, "satlib"), "satlib", "SATLIB (manifest.jsonl and .cnf files)")
    families = tuple(data_cfg.get("sat_families") or ()) or None
    return load_satlib(root, families, max_conflicts=data_cfg.get("max_conflicts", 200_000))


def sat_encoding_tasks(data_cfg):
    """Generated encoding problems (plus flat graph colouring where SATLIB's flat30-60 is
    present)."""
    from evaluators.sat import encoding_tasks
    root = data_dir(data_cfg, "satlib")
    return encoding_tasks(root if (root / "flat30-60").is_dir() else None,
                          data_cfg.get("generated_per_family", 10))


def sat_strategy_evaluator(data_cfg):
    """The SAT strategy checker (python-sat under a wall-time bound)."""
    from evaluators.sat import SATStrategyEvaluator
    return SATStrategyEvaluator(timeout_s=data_cfg.get("check_timeout_s", 10.0))


def sat_encoding_evaluator(data_cfg):
    """The SAT encoding checker (solve, then check the decoded model against the constraints)."""
    from evaluators.sat import SATEncodingEvaluator
    return SATEncodingEvaluator(timeout_s=data_cfg.get("check_timeout_s", 10.0))
