"""SMT task loaders: SMT-LIB files with a declared status, and generated encoding problems.

SMT-LIB layout (``$COUNTERMEM_DATA/smtlib``): ``manifest.jsonl`` rows with ``file``, ``logic`` and
``status`` (sat/unsat); the status must also appear in the file's ``(set-info :status ...)``.
"""
import json
import logging
import pathlib
import re

from evaluators.base import InputError, Task
from evaluators.grouping import digest
from evaluators.smt import problems
from evaluators.smt.checker import EncodingReference, FileReference

log = logging.getLogger(__name__)

SOLVER_HELP = ("Choose how to run a solver on it, one 'key: value' per line: solver (z3 or cvc5), "
               "optional tactics (z3 tactic names applied in sequence), option (key=value, "
               "repeatable), timeout_ms.")
ENCODING_HELP = ("Write an SMT-LIB 2 script: declare the constants, assert the constraints, end with "
                 "(check-sat).")


class DataError(InputError, ValueError):
    pass


def load_smtlib(root: str | pathlib.Path, logics=None, max_timeout_ms: int = 10_000) -> list[Task]:
    root = pathlib.Path(root)
    manifest = root / "manifest.jsonl"
    if not manifest.exists():
        raise DataError(f"{manifest}: manifest not found")
    tasks = []
    for lineno, line in enumerate(manifest.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{manifest}:{lineno}: not valid JSON ({err.msg})") from None
        if row.get("status") not in ("sat", "unsat") or "file" not in row:
            raise DataError(f"{manifest}:{lineno}: needs 'file' and 'status' sat/unsat")
        if logics is not None and row.get("logic") not in logics:
            continue
        path = root / row["file"]
        if not path.exists():
            raise DataError(f"{path}: listed in the manifest but missing")
        script = path.read_text(encoding="utf-8", errors="replace")
        declared = re.search(r"\(set-info\s+:status\s+(sat|unsat)\s*\)", script)
        if declared and declared.group(1) != row["status"]:
            raise DataError(f"{path}: manifest says {row['status']}, file says {declared.group(1)}")
        logic = row.get("logic", "?")
        tasks.append(Task(
            task_id=f"smtlib/{row['file']}", domain="smt", benchmark="smtlib",
            prompt=f"Solve SMT-LIB instance {row['file']} (logic {logic}). {SOLVER_HELP}",
            context=f"Logic: {logic}\nScript (truncated):\n{script[:3000]}",
            decision_unit="solver action", environment=logic,
            reference=FileReference(script, row["status"], max_timeout_ms),
            features={"logic": logic, "family": row.get("family", "")}))
    log.info("smtlib: loaded %d instances", len(tasks))
    return tasks


def encoding_tasks(per_family: int = 5, seed: int = 0) -> list[Task]:
    tasks = []
    for family in ("lia", "bv"):
        for i in range(per_family):
            p = problems.generate(family, seed * 1000 + i)
            tasks.append(Task(task_id=f"smt-enc/{family}/{seed}-{i}", domain="smt",
                              benchmark="smt-encoding", prompt=f"{p.describe()}\n{ENCODING_HELP}",
                              context=f"Problem type: {p.name}.", decision_unit="encoding",
                              environment=family, reference=EncodingReference(p),
                              features={"family": family, "problem": p.name}))
    return tasks


def group_key(task: Task) -> str:
    """Same script (the instance file's content) or the same generated problem statement."""
    ref = task.reference
    if isinstance(ref, FileReference):
        return digest(ref.script)
    return digest(ref.problem.describe())
