"""Loaders for the formal benchmarks in ``$COUNTERMEM_DATA``."""
import json
import pathlib
import re

from evaluators.base import InputError, Task
from evaluators.grouping import digest
from evaluators.formal.checkers import LeanReference, ProgramReference


class DataError(InputError, ValueError):
    pass


def _jsonl(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{i}: not valid JSON ({err.msg})") from None
    return rows


def load_lean_jsonl(path, benchmark: str, split: str | None = None, project_dir: str = "") -> list[Task]:
    tasks = []
    for i, row in enumerate(_jsonl(pathlib.Path(path))):
        for key in ("name", "formal_statement", "header"):
            if key not in row:
                raise DataError(f"{path}: row {i + 1}: missing field {key!r}")
        if split and row.get("split") != split:
            continue
        tasks.append(Task(
            task_id=f"{benchmark}/{row['name']}", domain="math", benchmark=benchmark,
            prompt=f"Prove this Lean 4 theorem. Answer with the tactic proof that follows ':= by'.\n"
                   f"{row.get('informal_prefix', '')}",
            context=f"{row['formal_statement']}\nGoal:\n{row.get('goal', '')}",
            decision_unit="tactic / proof step", environment=benchmark,
            reference=LeanReference(row["header"], row["formal_statement"], project_dir),
            features={"split": row.get("split", "")}))
    return tasks


def load_minif2f_lean_files(project: str | pathlib.Path, split: str = "Test") -> list[Task]:
    project = pathlib.Path(project)
    folder = project / "MiniF2F" / split
    if not folder.is_dir():
        raise DataError(f"{folder}: miniF2F Lean files not found")
    tasks = []
    for f in sorted(folder.glob("*.lean")):
        text = f.read_text(encoding="utf-8")
        m = re.search(r"^(theorem|lemma)\s", text, re.M)
        if not m:
            raise DataError(f"{f}: no theorem found")
        header, statement = text[: m.start()].strip(), text[m.start():].strip()
        statement = re.sub(r"\s*sorry\s*$", "", statement)
        tasks.append(Task(
            task_id=f"minif2f/{f.stem}", domain="math", benchmark="minif2f",
            prompt="Prove this Lean 4 theorem. Answer with the tactic proof that follows ':= by'.",
            context=statement, decision_unit="tactic / proof step", environment="minif2f",
            reference=LeanReference(header, statement, str(project)), features={"split": split}))
    return tasks


def load_dafnybench(root: str | pathlib.Path, limit: int | None = None) -> list[Task]:
    root = pathlib.Path(root)
    hints_removed, truth = root / "hints_removed", root / "ground_truth"
    if not hints_removed.is_dir() or not truth.is_dir():
        raise DataError(f"{root}: expected hints_removed/ and ground_truth/ folders")
    tasks = []
    for f in sorted(hints_removed.glob("*_no_hints.dfy"))[:limit]:
        base = f.name[: -len("_no_hints.dfy")]
        # The ground-truth program is not referenced by the task at all: no feature, prompt or
        # condition may see its path (tests use it directly to validate the checker).
        tasks.append(Task(
            task_id=f"dafnybench/{base}", domain="formal", benchmark="dafnybench",
            prompt="Add the loop invariants, assertions and other annotations this Dafny program "
                   "needs to verify. Do not change its specification. Answer with the whole program.",
            context=f.read_text(encoding="utf-8"), decision_unit="invariant / annotation",
            environment="dafnybench",
            reference=ProgramReference(f.read_text(encoding="utf-8"), "whole", "dafny")))
    return tasks


def load_vericoding(root: str | pathlib.Path, language: str, sources=None,
                    limit: int | None = None) -> list[Task]:
    root = pathlib.Path(root) / language
    if not root.is_dir():
        raise DataError(f"{root}: Vericoding {language} benchmarks not found")
    suffix = ".dfy" if language == "dafny" else ".rs"
    tasks = []
    for source in sorted(p for p in root.iterdir() if p.is_dir()):
        if sources and source.name not in sources:
            continue
        for f in sorted((source / "files").glob(f"*{suffix}"))[:limit]:
            text = f.read_text(encoding="utf-8")
            if "<vc-code>" not in text or "<vc-spec>" not in text:
                continue
            spec = re.search(r"// <vc-spec>\n(.*?)// </vc-spec>", text, re.S)
            tasks.append(Task(
                task_id=f"vericoding-{language}/{source.name}/{f.stem}", domain="formal",
                benchmark=f"vericoding-{language}",
                prompt=f"Write the body (the <vc-code> section) of this {language} function so that "
                       "it verifies against its specification.",
                context=text, decision_unit="code step" if language == "dafny" else "proof / code step",
                environment=source.name,
                reference=ProgramReference(text, "vc-code", language),
                features={"source": source.name, "spec": spec.group(1).strip() if spec else ""}))
    return tasks


def group_key(task: Task) -> str:
    """Same statement: the Lean header and theorem, or the program text, spacing normalized."""
    ref = task.reference
    if isinstance(ref, LeanReference):
        return digest(ref.header, ref.statement)
    return digest(ref.language, ref.task_program)
