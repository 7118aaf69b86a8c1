"""SAT task loaders: SATLIB files with known status, and generated encoding problems."""
import json
import logging
import pathlib

from evaluators.base import InputError, Task
from evaluators.grouping import digest
from evaluators.sat import dimacs, problems
from evaluators.sat.checker import EncodingReference, StrategyReference

log = logging.getLogger(__name__)

STRATEGY_HELP = ("Write a solver configuration, one 'key: value' per line: solver (e.g. glucose4, "
                 "cadical195, minisat22), optional assumptions (a cube of literals), phases "
                 "(preferred polarities), conflict_budget.")
ENCODING_HELP = ("Write a DIMACS CNF ('p cnf V C', clauses ending in 0) and map every variable "
                 "you use to its name with a comment line 'c var <number> <name>'.")


class DataError(InputError, ValueError):
    pass


def _manifest(root: pathlib.Path) -> list[dict]:
    path = root / "manifest.jsonl"
    if not path.exists():
        raise DataError(f"{path}: manifest not found (one JSON object per instance with 'file' and "
                        "'expected')")
    rows = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            if "file" not in row or row.get("expected") not in ("SAT", "UNSAT"):
                raise DataError(f"{path}:{lineno}: needs 'file' and 'expected' SAT/UNSAT")
            rows.append(row)
    return rows


def load_satlib(root: str | pathlib.Path, families=None, limit_per_family: int | None = None,
                max_conflicts: int = 200_000) -> list[Task]:
    """Solving-strategy tasks on SATLIB instances."""
    root = pathlib.Path(root)
    tasks, per_family = [], {}
    for row in _manifest(root):
        fam = row.get("family", row["file"].split("/")[0])
        if families is not None and fam not in families:
            continue
        if limit_per_family is not None and per_family.get(fam, 0) >= limit_per_family:
            continue
        path = root / row["file"]
        try:
            cnf = dimacs.parse(path.read_text())
        except (OSError, dimacs.DimacsError) as err:
            raise DataError(f"{path}: {err}") from None
        per_family[fam] = per_family.get(fam, 0) + 1
        tasks.append(Task(
            task_id=f"satlib/{row['file']}", domain="sat", benchmark="satlib",
            prompt=f"Decide the satisfiability of SATLIB instance {row['file']} ({fam}: "
                   f"{cnf.num_vars} variables, {len(cnf.clauses)} clauses). {STRATEGY_HELP}",
            context=f"Family: {fam}. Conflict budget: {max_conflicts}.",
            decision_unit="branching", environment=fam,
            reference=StrategyReference(cnf.num_vars, cnf.clauses, row["expected"], max_conflicts),
            features={"family": fam, "num_vars": cnf.num_vars, "num_clauses": len(cnf.clauses)}))
    log.info("satlib: loaded %d instances (%s)", len(tasks), per_family)
    return tasks


def encoding_tasks(root: str | pathlib.Path | None = None, generated_per_family: int = 5,
                   seed: int = 0) -> list[Task]:
    """Encoding tasks: SATLIB flat graphs (when ``root`` is given) plus generated problems."""
    items = []
    if root is not None:
        for row in _manifest(pathlib.Path(root)):
            if row.get("family", "").startswith("flat"):
                cnf = dimacs.parse((pathlib.Path(root) / row["file"]).read_text())
                items.append((f"satlib-enc/{row['file']}", "flat",
                               problems.graph_from_flat_cnf(cnf.num_vars, cnf.clauses)))
    for family in ("coloring", "nqueens", "pigeonhole", "scheduling"):
        for i in range(generated_per_family):
            items.append((f"sat-enc/{family}/{seed}-{i}", family,
                          problems.generate(family, seed * 1000 + i)))
    return [Task(task_id=tid, domain="sat", benchmark="sat-encoding",
                 prompt=f"{p.describe()}\n{ENCODING_HELP}", context=f"Problem type: {p.name}.",
                 decision_unit="encoding", environment=family,
                 reference=EncodingReference(p), features={"family": family, "problem": p.name})
            for tid, family, p in items]


def group_key(task: Task) -> str:
    """Same instance (its clauses) or, for encodings, the same generated problem statement."""
    ref = task.reference
    if isinstance(ref, StrategyReference):
        return digest(ref.num_vars, sorted(tuple(sorted(c)) for c in ref.clauses))
    return digest(ref.problem.describe())
