"""Per-check overhead of each world model: time beyond the bare query / solve, same run.

    python -m benchmarks.speed.evaluators [--repeats=5]

Goals (issues #4, #5): SQL ≤ 2 ms on the Spider databases; SAT/SMT in-process ≤ 5 ms;
subprocess-isolated SAT ≤ 60 ms; sandboxed repository tests ≤ 150 ms beyond a bare pytest run.
Needs the benchmark data (``COUNTERMEM_DATA``). Without the ``solvers`` extra (python-sat, z3) the
SAT and SMT timings are skipped with a note and the others are still printed.
"""
import sqlite3
import statistics

from absl import app, flags

from benchmarks.common import median_time, optional_module, print_result
from countermem_jax.runtime.paths import data_root

_REPEATS = flags.DEFINE_integer("repeats", 5, "Timing repeats per item (the median is kept).")
_ITEMS = flags.DEFINE_integer("items", 40, "Items per checker.")


def _overhead(pairs, repeats):
    """pairs of (checked, bare) callables -> median overhead in ms, and median bare time in ms."""
    over, bare = [], []
    for checked, bare_fn in pairs:
        t_checked, t_bare = median_time(checked, repeats), median_time(bare_fn, repeats)
        over.append(t_checked - t_bare)
        bare.append(t_bare)
    return statistics.median(over) * 1e3, statistics.median(bare) * 1e3


def sql_pairs(n):
    """(checked, bare) timing pairs for ``n`` Spider tasks: the SQL checker on the gold query vs
    executing that query on an already open read-only connection.
    """
    from evaluators.sql import SQLEvaluator, load_spider
    evaluator = SQLEvaluator()
    tasks = load_spider(data_root() / "spider")[::7][:n]
    conns = {}

    def bare(task):
        path = task.reference.db_path
        conn = conns.setdefault(path, sqlite3.connect(f"file:{path}?mode=ro", uri=True))
        return lambda: conn.execute(task.reference.gold_sql).fetchall()

    return [(lambda t=t: evaluator.evaluate(evaluator.reset(t), t.reference.gold_sql), bare(t))
            for t in tasks]


def sat_pairs(n, solver, isolate):
    """(checked, bare) pairs for ``n`` SATLIB tasks with ``solver``, and the evaluator to close.

    ``isolate`` states whether the evaluator is expected to run this solver in a subprocess
    (solvers that cannot be interrupted in-process); the assert keeps the label honest.
    """
    from evaluators.sat import SATStrategyEvaluator, load_satlib
    from evaluators.sat import solving
    from evaluators.sat.solving import SolverRunner
    from pysat.solvers import Solver
    evaluator = SATStrategyEvaluator(runner=SolverRunner())
    tasks = load_satlib(data_root() / "satlib", families={"uf50-218", "uuf50-218"})[:n]

    def bare(task):
        def run():
            with Solver(name=solver, bootstrap_with=[list(c) for c in task.reference.clauses]) as s:
                s.solve()
        return run

    def checked(task):  # the evaluator isolates solvers that cannot be interrupted in-process
        return lambda: evaluator.evaluate(evaluator.reset(task), f"solver: {solver}")
    assert isolate == (solver not in solving.INTERRUPTIBLE)
    return [(checked(t), bare(t)) for t in tasks], evaluator


def smt_pairs(n):
    """(checked, bare) pairs for the ``n`` shortest SMT-LIB scripts: the checker with z3 vs z3
    solving the script in a fresh context.
    """
    import z3

    from evaluators.smt import SMTSolverEvaluator, load_smtlib
    evaluator = SMTSolverEvaluator()
    tasks = sorted(load_smtlib(data_root() / "smtlib"), key=lambda t: len(t.reference.script))[:n]

    def bare(task):
        def run():
            s = z3.Solver(ctx=z3.Context())
            s.from_string(task.reference.script)
            s.check()
        return run
    return [(lambda t=t: evaluator.evaluate(evaluator.reset(t), "solver: z3"), bare(t))
            for t in tasks]


def main(argv):
    """Measures each checker's median overhead over its bare check, reports each against its goal
    as a ratio, and prints the ``result:`` line; missing extras skip only their own figures.
    """
    del argv
    n, repeats = _ITEMS.value, _REPEATS.value
    result = {}
    result["sql_overhead_ms"], result["sql_bare_ms"] = _overhead(sql_pairs(n), repeats)
    if optional_module("pysat", extra="solvers", what="the SAT timings") is not None:
        pairs, ev = sat_pairs(n, "glucose4", isolate=False)
        result["sat_inprocess_overhead_ms"], result["sat_inprocess_bare_ms"] = _overhead(pairs,
                                                                                         repeats)
        ev.close()
        pairs, ev = sat_pairs(n, "cadical195", isolate=True)
        result["sat_subprocess_overhead_ms"], result["sat_subprocess_bare_ms"] = _overhead(pairs,
                                                                                           repeats)
        ev.close()
    if optional_module("z3", extra="solvers", what="the SMT timings") is not None:
        result["smt_overhead_ms"], result["smt_bare_ms"] = _overhead(smt_pairs(min(n, 12)),
                                                                     repeats)
    try:
        from benchmarks.speed import sandbox_overhead
        result.update(sandbox_overhead.measure(repeats))
    except ImportError:
        pass
    goals = {"sql_overhead_ms": 2, "sat_inprocess_overhead_ms": 5, "smt_overhead_ms": 5,
             "sat_subprocess_overhead_ms": 60, "repo_sandbox_overhead_ms": 150}
    for key, goal in goals.items():
        if key in result:
            bare_key = key.replace("overhead", "bare")
            print(f"{key[:-12]:<16} overhead {result[key]:7.2f} ms (bare check "
                  f"{result.get(bare_key, float('nan')):7.2f} ms; goal ≤ {goal} ms; "
                  f"ratio to goal {result[key] / goal:.2f})")
    print_result(result)


if __name__ == "__main__":
    app.run(main)
