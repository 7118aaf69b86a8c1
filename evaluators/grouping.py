"""Group keys: tasks that share a normalized reference belong to one group.

Spider's dev set pairs most questions with a paraphrase that has the same gold query; if the two
landed in different splits, an evaluation question could retrieve its twin's verified record,
whose corrected action is its own gold answer. Splits keep every group inside one split. Each
domain's loader module defines ``group_key(task)`` from the task's reference (which only the
checker and the splitter read, never a prompt or a condition):

  sql      database + the gold query normalized by sqlglot (identifiers, keywords, spacing, case)
  coding   repository snapshot + the files an edit may touch (+ the instance's test patch)
  math / formal   the statement (Lean header + theorem, or the program) with spacing normalized
  sat / smt       the instance's content (clauses, script) or the generated problem's statement
"""
import hashlib
import importlib

_MODULES = {"sql": "evaluators.sql.loaders", "coding": "evaluators.coding.loaders",
            "math": "evaluators.formal.loaders", "formal": "evaluators.formal.loaders",
            "sat": "evaluators.sat.loaders", "smt": "evaluators.smt.loaders"}


def digest(*parts) -> str:
    """A short stable hash of whitespace-normalized text parts."""
    text = "\x1f".join(" ".join(str(p).split()) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def group_key(task) -> str:
    """The task's group; a task whose domain has no rule, or no reference, is its own group."""
    module = _MODULES.get(task.domain)
    if module is None or task.reference is None:
        return f"task:{task.task_id}"
    return f"{task.domain}:{importlib.import_module(module).group_key(task)}"


def group_id(task) -> str:
    """A short stable id of the task's group (a digest of ``group_key``): what a memory record
    carries of its source task, and what retrieval and the intervals compare, without holding the
    reference text itself."""
    return digest(group_key(task))
