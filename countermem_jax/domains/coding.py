"""Coding (SWE-bench Verified, BugsInPy, and QuixBugs as an extra; paper Appendix D.1): the coding
domain, its rule edit operators of Module I (paper §3.2, Appendix B.4) and its loaders.

The action is one localized edit (FILE / LINES / REPLACE); the rule operators change one token of
the replacement lines (a comparison, an off-by-one, a boolean operator or constant).
"""
import re

from countermem_jax.domains.base import (Domain, data_dir, distinct_edits, require,
                                         require_setting)
from countermem_jax.runtime.paths import data_root


def python_edits(source: str, lines: list[int] | None = None, limit: int = 8) -> list[str]:
    """Comparison, off-by-one and boolean-operator edits on the given (failing) lines."""
    src_lines = source.splitlines(keepends=True)
    targets = lines or list(range(1, len(src_lines) + 1))
    # (pattern, replacement) pairs. The lookarounds keep ``<`` and ``>`` from matching inside
    # ``<=``, ``<<``, ``>>`` or a ``->`` return annotation; ``+ 1`` / ``- 1`` are removed whole.
    swaps = [(r"<=", "<"), (r"(?<![<>=!])<(?![<=])", "<="), (r">=", ">"),
             (r"(?<![<>=!-])>(?![>=])", ">="), (r"==", "!="), (r"!=", "=="), (r"\band\b", "or"),
             (r"\bor\b", "and"), (r"\+ 1\b", ""), (r"- 1\b", ""), (r"\bTrue\b", "False"),
             (r"\bFalse\b", "True")]
    out = []
    for ln in targets:
        if not 1 <= ln <= len(src_lines):
            continue
        line = src_lines[ln - 1]
        # Signatures and imports are interface, not the bug: editing them breaks every caller.
        if line.lstrip().startswith(("#", "def ", "class ", "import ", "from ")):
            continue
        for pattern, repl in swaps:
            for m in re.finditer(pattern, line):  # the first match only: one change per variant
                new = line[: m.start()] + repl + line[m.end():]
                out.append("".join(src_lines[: ln - 1] + [new] + src_lines[ln:]))
                break
        # The other off-by-one direction: ``+ 1`` after the first name that closes an index or a
        # call argument list (``a[i]`` -> ``a[i + 1]``, ``range(n)`` -> ``range(n + 1)``).
        for m in re.finditer(r"(\w+)\s*(\]|\))", line):
            if m.group(1).isidentifier() and not m.group(1).isdigit():
                new = line[: m.end(1)] + " + 1" + line[m.end(1):]
                out.append("".join(src_lines[: ln - 1] + [new] + src_lines[ln:]))
                break
    return distinct_edits(source, out)[:limit]


def localized_edit_variants(task, action: str) -> list[str]:
    """Python operators applied to the replacement block of a localized edit (the failing lines)."""
    from evaluators.coding import edits
    # A unified diff (the checker accepts that form too) gets no rule edits: only the localized
    # form says which lines are the decision unit.
    try:
        edit = edits.parse_localized(action)
    except edits.EditError:
        return []
    if edit is None:
        return []
    out = []
    # Same FILE and LINES, so every variant is still one localized edit of the same place.
    for variant in python_edits(edit.replacement + "\n"):
        out.append(f"FILE: {edit.path}\nLINES: {edit.start}-{edit.end}\nREPLACE:\n"
                   f"{variant.rstrip(chr(10))}")
    return out


# The hint names the features the coding loaders attach to a task (``evaluators/coding/
# loaders.py``: program and file for QuixBugs, repo for SWE-bench), which the rule checker tests.
CODING = Domain(
    "coding", "Answer with one localized edit in exactly this form:\nFILE: <path>\nLINES: "
    "<first>-<last>\nREPLACE:\n<the new lines>",
    "A condition may test 'program == <name>', 'file == <path>' or 'repo == <name>'.",
    localized_edit_variants, fences=("diff", "python", "patch"))


# --- Loaders ---------------------------------------------------------------------------------

def repo_evaluator(data_cfg):
    """The repository-tests checker (the task's tests in a bubblewrap sandbox)."""
    from evaluators.coding.checker import RepoTestEvaluator
    return RepoTestEvaluator()


def quixbugs_tasks(data_cfg):
    """QuixBugs' Python programs with their tests."""
    from evaluators.coding.loaders import load_quixbugs
    return load_quixbugs(require(data_dir(data_cfg, "quixbugs"), "quixbugs", "QuixBugs"))


def swebench_tasks(data_cfg):
    """SWE-bench Verified instances, each on its prepared checkout (``swebench_checkouts``)."""
    from evaluators.coding.loaders import load_swebench
    default = "swebench_verified/swe_verified_15min1h_2files_instances.json"
    instances = require(data_cfg.get("swebench_json") or data_root() / default,
                        "swebench", "SWE-bench Verified instances")
    checkouts = require_setting(
        data_cfg, "swebench_checkouts", "swebench", "checkouts",
        "swebench: needs one prepared checkout per instance; "
        "`python -m countermem_jax.data fetch swebench` prints how to build them, "
        "then pass --config.data.swebench_checkouts=DIR")
    return load_swebench(instances, checkouts)


def bugsinpy_tasks(data_cfg):
    """BugsInPy bugs, each on its checkout made by BugsInPy (``bugsinpy_checkouts``)."""
    from evaluators.coding.loaders import load_bugsinpy
    root = require(data_cfg.get("bugsinpy_root") or data_root() / "bugsinpy", "bugsinpy",
                   "BugsInPy (projects/<p>/bugs/<n>/bug.info)")
    checkouts = require_setting(
        data_cfg, "bugsinpy_checkouts", "bugsinpy", "checkouts",
        "bugsinpy: needs one checkout per bug made with BugsInPy's "
        "bugsinpy-checkout; `python -m countermem_jax.data fetch bugsinpy` "
        "prints how, then pass --config.data.bugsinpy_checkouts=DIR")
    return load_bugsinpy(root, checkouts)
