"""The domain kinds used by the registered benchmarks (action format, parser, rule edits)."""
from countermem_jax import operators
from countermem_jax.domains import formal_edits
from countermem_jax.domains.base import Domain

SQL = Domain(
    "sql",
    "Write one SQLite SELECT statement that answers the question, using only tables and columns "
    "from the schema. Put it in a ```sql code block.",
    "Prefer a condition written as a rule over the question's features, e.g. 'bound == inclusive', "
    "'bound == strict', 'distinct == true', 'aggregate == count', 'ordering == desc', "
    "'db_id == <name>', or 'question contains \"<phrase>\"'.",
    lambda task, action: operators.sql_edits(action, getattr(task.reference, "db_path", None),
                                             question=task.prompt))

SAT_STRATEGY = Domain(
    "sat", "Write the solver configuration as 'key: value' lines in a ``` code block.",
    "A condition may test 'family == <name>' or 'num_vars' style features.",
    lambda task, action: operators.sat_strategy_edits(action))

SAT_ENCODING = Domain(
    "sat", "Write the DIMACS CNF with its 'c var N NAME' map in a ``` code block.",
    "A condition may test 'problem == <name>' or 'family == <name>'.",
    lambda task, action: operators.sat_encoding_edits(action))

SMT_SOLVER = Domain(
    "smt", "Write the solver action as 'key: value' lines in a ``` code block.",
    "A condition may test 'logic == <name>' or 'family == <name>'.",
    lambda task, action: operators.smt_solver_edits(action))

SMT_ENCODING = Domain(
    "smt", "Write the SMT-LIB 2 script in a ```smt2 code block.",
    "A condition may test 'problem == <name>' or 'family == <name>'.",
    lambda task, action: operators.smt_encoding_edits(action))


def _coding_edits(task, action: str) -> list[str]:
    """Python operators applied to the replacement block of a localized edit (the failing lines)."""
    from evaluators.coding import edits
    try:
        edit = edits.parse_localized(action)
    except edits.EditError:
        return []
    if edit is None:
        return []
    out = []
    for variant in operators.python_edits(edit.replacement + "\n"):
        out.append(f"FILE: {edit.path}\nLINES: {edit.start}-{edit.end}\nREPLACE:\n"
                   f"{variant.rstrip(chr(10))}")
    return out


CODING = Domain(
    "coding", "Answer with one localized edit in exactly this form:\nFILE: <path>\nLINES: "
    "<first>-<last>\nREPLACE:\n<the new lines>",
    "A condition may test 'program == <name>', 'file == <path>' or 'repo == <name>'.",
    _coding_edits)

LEAN = Domain("math", "Write only the tactic proof that follows ':= by', in a ```lean code block.",
              "A condition may test 'split == <name>'.", formal_edits.lean_edits)

AMBER = Domain(
    "math", "Write the whole Lean 4 solution in a ```lean code block: first the construction "
    "(replace every `sorry` in the definitions by an explicit term), then the proofs of the "
    "theorems about it. Do not change any theorem statement.",
    "A condition may test 'task_type == <evaluation|algorithm|representation|proof>' or "
    "'area == <name>'.", formal_edits.amber_edits)

DAFNY = Domain("formal", "Write the whole program in a ```dafny code block.",
               "A condition may test 'source == <name>'.", formal_edits.dafny_edits)

VERUS = Domain("formal", "Write the function body (the <vc-code> section) in a ```rust code block.",
               "A condition may test 'source == <name>'.", formal_edits.verus_edits)

VERICODING_DAFNY = Domain(
    "formal", "Write the method body (the <vc-code> section) in a ```dafny code block.",
    "A condition may test 'source == <name>'.", formal_edits.dafny_edits)
