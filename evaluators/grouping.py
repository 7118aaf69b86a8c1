"""Group keys: tasks that share a normalized reference belong to one group."""
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
