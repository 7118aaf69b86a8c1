"""Headroom calibration: memory can only help where the base agent fails, so each
setting reports how often the *trivial default action* succeeds, and for the solver settings the
budget under which defaults fail on a sizeable fraction.
"""
import dataclasses
import json
import time

from countermem_jax.protocol import pools

SAT_SOLVERS = ("glucose4", "minisat22", "cadical195")
SAT_BUDGETS = (200_000, 1_000, 100, 45, 30)
SAT_HARD_FAMILIES = ("uf50-218", "uuf50-218", "flat30-60")
SMT_SOLVERS = ("z3", "cvc5")
SMT_TIMEOUTS_MS = (10_000, 50, 10)
SMT_RLIMITS = (20_000, 5_000, 2_000)


@dataclasses.dataclass
class Row:
    """One calibration figure: ``solved`` of ``total`` tasks of ``setting`` succeed with ``action``
    under ``budget`` (a loader or evaluator limit, written as ``name=value``).
    """
    setting: str
    action: str
    budget: str
    solved: int
    total: int

    @property
    def rate(self) -> float:
        """Fraction solved, 0 for an empty setting."""
        return self.solved / self.total if self.total else 0.0


def _run(tasks, evaluator, action: str) -> int:
    """How many ``tasks`` the fixed ``action`` solves, each checked from a fresh reset."""
    return sum(evaluator.evaluate(evaluator.reset(t), action).success for t in tasks)


def calibrate_satlib(root, solvers=SAT_SOLVERS, budgets=SAT_BUDGETS,
                     families=(None, SAT_HARD_FAMILIES)) -> list[Row]:
    """Rows for all instances and for the harder families only, at each conflict budget."""
    from evaluators.sat import SATStrategyEvaluator, load_satlib
    evaluator = SATStrategyEvaluator(timeout_s=10.0)
    rows = []
    try:
        for fams in families:
            setting = "satlib" if fams is None else "satlib[" + ",".join(fams) + "]"
            for budget in budgets:
                tasks = load_satlib(root, fams, max_conflicts=budget)
                for solver in solvers:
                    rows.append(Row(setting, f"solver: {solver}", f"max_conflicts={budget}",
                                    _run(tasks, evaluator, f"solver: {solver}"), len(tasks)))
    finally:
        evaluator.close()
    return rows


def calibrate_smtlib(root, solvers=SMT_SOLVERS, timeouts=SMT_TIMEOUTS_MS,
                     rlimits=SMT_RLIMITS) -> list[Row]:
    """Rows per time limit, then per deterministic work cap (at the loader's 10 s limit)."""
    from evaluators.smt import SMTSolverEvaluator, load_smtlib
    evaluator = SMTSolverEvaluator()
    budgets = [(t, 0) for t in timeouts] + [(10_000, r) for r in rlimits]
    rows = []
    for timeout, rlimit in budgets:
        tasks = [dataclasses.replace(t, reference=dataclasses.replace(t.reference,
                                                                      max_rlimit=rlimit))
                 for t in load_smtlib(root, max_timeout_ms=timeout)]
        budget = f"smt_max_rlimit={rlimit}" if rlimit else f"smt_max_timeout_ms={timeout}"
        for solver in solvers:
            rows.append(Row("smtlib", f"solver: {solver}", budget,
                            _run(tasks, evaluator, f"solver: {solver}"), len(tasks)))
    return rows


def empty_reference_tasks(root, db_ids=pools.tuning_pool()) -> tuple[list[str], int]:
    """(ids of the Spider questions of ``db_ids`` whose reference result is empty, number of
    questions read); raises ``pools.PoolError`` for a report-pool database or an empty
    ``db_ids`` (every database) before any reference runs."""
    import ml_collections
    from countermem_jax.domains import sql as sql_domain
    pools.require_tuning_pool("spider", db_ids, "calibrate spider")
    tasks = sql_domain.spider_tasks(ml_collections.ConfigDict(
        {"data_dir": str(root), "db_ids": tuple(db_ids)}))
    evaluator = sql_domain.sql_evaluator(10.0)({})
    empty = [t.task_id for t in tasks if not evaluator.gold_result(t.reference)[0]]
    return empty, len(tasks)


def calibrate_spider(root, db_ids=pools.tuning_pool()) -> list[Row]:
    """One row: the Spider questions of ``db_ids`` whose reference result is empty ("solved"
    counts them)."""
    empty, total = empty_reference_tasks(root, db_ids)
    return [Row("spider", "reference query", "empty result", len(empty), total)]


def format_rows(rows: list[Row]) -> str:
    """Fixed-width text table of calibration rows (solved/total and percentage)."""
    lines = [f"{'setting':38} {'default action':20} {'budget':28} {'solved':>9} {'rate':>6}"]
    for r in rows:
        lines.append(f"{r.setting:38} {r.action:20} {r.budget:28} {r.solved:>4}/{r.total:<4} "
                     f"{100 * r.rate:5.1f}%")
    return "\n".join(lines)


def calibrate(root, settings=("satlib", "smtlib", "spider"),
              spider_db_ids=pools.tuning_pool()) -> tuple[list[Row], float]:
    """Rows for the requested settings under ``root`` (Spider: the databases
    ``spider_db_ids``) and the wall time they took."""
    start = time.perf_counter()
    rows = []
    if "satlib" in settings:
        rows += calibrate_satlib(root / "satlib")
    if "smtlib" in settings:
        rows += calibrate_smtlib(root / "smtlib")
    if "spider" in settings:
        rows += calibrate_spider(root / "spider", spider_db_ids)
    return rows, time.perf_counter() - start


def result_line(rows: list[Row], seconds: float) -> str:
    """The machine-readable last line: ``result: {rows, seconds}`` as JSON."""
    return "result: " + json.dumps({"rows": [dict(dataclasses.asdict(r), rate=round(r.rate, 4))
                                             for r in rows], "seconds": round(seconds, 1)})
