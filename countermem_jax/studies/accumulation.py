"""Study 5, accumulation (paper §5.2 (a–c), Appendix D.3): held-out score, retrieval and context
tokens per task, and regression on earlier tasks, at store snapshots after 0, 25, 50, 100 and
200 processed source tasks, over five source-task orderings, CounterMem and ReasoningBank side
by side.
"""
import numpy as np

from countermem_jax.phases import context
from countermem_jax.studies import cells

TITLE = "Learning from more source tasks"
PAPER = "§5.2 (a–c), Appendix D.3"
LABELS = {"countermem": "CounterMem", "reasoningbank": "ReasoningBank"}


def orderings(build_ids: list, count: int, seed: int) -> list[list]:
    """Ordering 0 is the split's own order; ordering o > 0 a seeded permutation of it."""
    out = [list(build_ids)]
    for o in range(1, count):
        perm = np.random.default_rng(seed + o).permutation(len(build_ids))
        out.append([build_ids[i] for i in perm])
    return out


def _construction_solved(cell, task_ids: list) -> dict:
    from countermem_jax import experiment
    ends = {}
    for e in experiment.Workdir(cell).log.events("task_end"):
        if e.get("phase") == "construction" and e["task_id"] in task_ids:
            ends[e["task_id"]] = bool(e["solved"])
    return ends


def run(cfg, workdir, *, backbone=None, benchmark=None) -> dict:
    """Runs the accumulation study into ``workdir`` (one cell per method, ordering and
    snapshot) and returns its ``study.json`` record (rows schema, panels a-c of §5.2).
    ``backbone`` / ``benchmark`` replace the configured ones (tests, the scripted model)."""
    s, base = cfg.protocol, cfg.base
    checkpoints = sorted(int(n) for n in s.checkpoints)
    st = cells.Study(cfg, workdir, backbone, benchmark)
    sp = context.draw_splits(base, st.tasks)
    build_ids = cells.ids(sp.build)
    if checkpoints[-1] > len(build_ids):
        raise cells.StudyError(f"study.checkpoints go up to {checkpoints[-1]} source tasks but "
                               f"the construction split has {len(build_ids)}; raise "
                               "splits.n_build or lower the checkpoints")
    if not 0 < s.regression_tasks <= checkpoints[-1]:
        raise cells.StudyError(f"study.regression_tasks={s.regression_tasks}: must be between 1 "
                               f"and the last checkpoint ({checkpoints[-1]})")
    fixed = dict(train=cells.ids(sp.train), validation=cells.ids(sp.validation),
                 eval=cells.ids(sp.eval))
    orders = orderings(build_ids, int(s.orderings), int(s.ordering_seed))
    rows, selector_cell, eval_groups = [], None, None
    for method in s.methods:
        label = LABELS.get(method, method)
        score, tokens, regression = {}, {}, {}
        # ordering 0's last snapshot first: CounterMem's selector is trained there, once
        plan = [(0, checkpoints[-1])] + [(o, n) for o in range(len(orders)) for n in checkpoints
                                         if (o, n) != (0, checkpoints[-1])]
        for o, n in plan:
            cell = st.cell(f"{method}/order{o}/n{n}")
            pcfg = cells.phase_config(base, method=method, **{"splits.manifest": st.manifest(
                cell, build=orders[o][:n], **fixed)})
            if method == "countermem" and selector_cell is None:
                selector_cell = cell
                st.run_phases(pcfg, cell, evaluate=False)
            else:
                st.run_phases(pcfg, cell, train=False, evaluate=False)
                if method == "countermem":
                    cells.share_memory(selector_cell, cell, store=False)
            result, spent = st.evaluate_with_memory_tokens(pcfg, cell)
            mem_run = cells.memory_run(result)
            # the held-out tasks' reference groups as evaluated (the same in every cell)
            eval_groups = eval_groups or cells.reference_groups(result, fixed["eval"])
            score[(o, n)] = cells.solved_row(cells.task_ends(cell, mem_run), fixed["eval"])
            tokens[(o, n)] = spent / len(fixed["eval"])
            if n >= s.regression_tasks:
                earlier = orders[o][:s.regression_tasks]
                again = st.cell(f"{method}/order{o}/n{n}-earlier")
                cells.share_memory(cell, again, store=True)
                rcfg = cells.phase_config(base, method=method, **{"splits.manifest": st.manifest(
                    again, train=fixed["train"], validation=fixed["validation"], eval=earlier)})
                st.run_phases(rcfg, again, build=False, train=False)
                built = _construction_solved(cell, earlier)
                now = cells.task_ends(again, mem_run)
                regression[(o, n)] = [100.0 * (built[t] - bool(now[t]["solved"]))
                                      for t in earlier]
        runs = [f"ordering{o}" for o in range(len(orders))]
        for n in checkpoints:
            rows.append(cells.row("a", "held-out score", "score", "score (0-100)", label, n,
                                  [score[(o, n)] for o in range(len(orders))], runs, "tasks",
                                  fixed["eval"], unit_groups=eval_groups))
            rows.append(cells.row("b", "retrieval + context tokens per task",
                                  "memory_tokens_per_task", "tokens per held-out task", label, n,
                                  [[tokens[(o, n)]] for o in range(len(orders))], runs,
                                  "orderings", tasks_behind=len(fixed["eval"])))
            if n >= s.regression_tasks:
                rows.append(cells.row("c", "regression on earlier tasks", "regression",
                                      "score lost on earlier tasks (pp)", label, n,
                                      [regression[(o, n)] for o in range(len(orders))], runs,
                                      "earlier tasks (by position in the ordering)"))
    notes = [f"checkpoints {checkpoints} processed source tasks; {len(orders)} orderings "
             f"(ordering 0 = the split's order, others seeded from {s.ordering_seed}); "
             f"earlier-task set: the first {s.regression_tasks} source tasks of each ordering",
             "CounterMem's selector was trained once on ordering 0's last snapshot and reused "
             "unchanged at every snapshot"]
    record = st.write(title=TITLE, paper=PAPER, rows=rows, manifest=dict(
        build=build_ids, **fixed), notes=notes)
    for r in rows:
        v = np.asarray(r["values"], float)
        print(f"accumulation {r['method']:<14} panel {r['panel']} n={r['x']:<4} "
              f"{r['metric']}: {v.mean():.2f}")
    return record
