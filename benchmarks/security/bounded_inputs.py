r"""Speed of every parser, edit routine, condition and retrieval step on a 1 MB input (issue 39:
no input of at most 1 MB may make one take more than 1 s).

    python -m benchmarks.security.bounded_inputs [--only=substring] [--timeout_s=60]

Each case calls one routine on a hostile input of about 1 MB (a reply, a draft, an edit, a
condition) in a forked process, best of ``--repeats``, and prints one line: case, input size,
seconds, and the ratio to the 1 s bound (above 1 fails; a case still running at
``--timeout_s`` is killed and fails). Last line ``result: {json}`` with the case count, the
slowest case and those over the bound. Run it under the CPU lock (``flock
/tmp/cpu-heavy.lock``): the figures are wall time on a shared machine.
"""
import multiprocessing
import time

from absl import app, flags

from benchmarks.common import print_result

_ONLY = flags.DEFINE_string("only", "", "Run only the cases whose name contains this.")
_TIMEOUT = flags.DEFINE_float("timeout_s", 60.0, "Seconds after which a case is killed.")
_REPEATS = flags.DEFINE_integer("repeats", 2, "Runs per case; the best is reported.")

BOUND_S = 1.0
MB = 1 << 20
SQL = "SELECT name FROM singer WHERE age > 18 LIMIT 0"


def _words(n_bytes: int, vocab: int = 97) -> str:
    """About ``n_bytes`` of words from a small vocabulary (many repeats: the worst case of an
    alignment)."""
    return " ".join(f"w{i % vocab}" for i in range(n_bytes // 4))[:n_bytes]


def _changed(text: str) -> str:
    """``text`` with one word changed in its middle (a local edit of a long action)."""
    middle = len(text) // 2
    return text[:middle] + " CHANGED " + text[middle:]


def _case_inputs():
    """Case name -> a function of no arguments (built lazily in the child) and the input size."""
    from countermem_jax.backbones import replies
    from countermem_jax.backbones.base import ChatResult
    from countermem_jax.domains import sql as sql_domain
    from countermem_jax.method import edit_replay, locality, text_embedding
    from countermem_jax.method.memory import record
    from countermem_jax.method.prompting import parsers
    from countermem_jax.domains import sql_names
    from countermem_jax.domains.base import TEXT_NAMES
    from countermem_jax.method.conditions import TaskFacts, derive, never_holds
    from countermem_jax.method.conditions import checkers as conditions

    long_action = SQL + " -- " + _words(MB)
    long_edit = _changed(long_action)
    checker = conditions.RuleChecker()
    task = TaskFacts("t", "How old is the singer?", {"bound": "strict"},
                     draft=long_action, feedback="no such column: x")
    deep = "SELECT " + "(" * 60 + "1" + ")" * 60
    at_bound = _in_lists(sql_names.MAX_SQL_CHARS, sql_names.MAX_SQL_NODES)
    wide = _in_lists(sql_names.MAX_SQL_CHARS, 10 ** 9)
    very_deep = "SELECT " + "(" * 50_000 + "1" + ")" * 50_000
    return {
        "reply_sanitize_surrogates_1mb": (
            lambda: replies.sanitize(ChatResult(("x\udcff\x00" * (MB // 3))), 512), MB),
        "is_local_edit_1mb_one_change": (lambda: parsers.is_local_edit(long_action, long_edit),
                                         MB),
        "is_local_edit_1mb_all_changed": (
            lambda: parsers.is_local_edit(long_action, _words(MB, vocab=89)), MB),
        "locality_problem_1mb_one_change": (
            lambda: locality.locality_problem(long_action, long_edit), MB),
        "parse_local_edits_1mb_find_lines": (
            lambda: _raises(parsers.parse_local_edits, "FIND: x\n" * (MB // 8), SQL, 4), MB),
        "parse_local_edits_1mb_pairs_on_1mb_action": (
            lambda: _raises(parsers.parse_local_edits, "FIND: w1 w2\nREPLACE: w3\n" *
                            (MB // 24), long_action, 4), MB),
        "parse_local_edits_1mb_blank_lines": (
            lambda: _raises(parsers.parse_local_edits, "FIND: x\nREPLACE: y" + "\n" * MB + "z",
                            SQL + " x", 4), MB),
        "parse_action_sql_1mb_fences": (
            lambda: _raises(sql_domain.SQL.parse_action, "```sql\n" * (MB // 7)), MB),
        "parse_action_sql_1mb_reply": (
            lambda: _raises(sql_domain.SQL.parse_action, "```sql\n" + long_action + "\n```"),
            MB),
        "parse_distilled_1mb": (
            lambda: _raises(parsers.parse_distilled, "SITUATION: s\nCONDITION: " + _words(MB)),
            MB),
        "parse_function_calls_1mb": (
            lambda: _raises(parsers.parse_function_calls,
                            'CALL: {"name": "archival_memory_insert", "arguments": {"content": '
                            '"x"}}\n' * (MB // 80) + "DONE", ("archival_memory_insert",)), MB),
        "parse_insight_operations_1mb_blank_lines": (
            lambda: _raises(parsers.parse_insight_operations, "x" + "\n" * MB + "y", 3), MB),
        "parse_function_calls_1mb_blank_lines": (
            lambda: _raises(parsers.parse_function_calls, "x" + "\n" * MB + "y",
                            ("archival_memory_insert",)), MB),
        "parse_insight_operations_1mb": (
            lambda: _raises(parsers.parse_insight_operations, "ADD: x\n" * (MB // 7), 3), MB),
        "record_edit_text_1mb_one_change": (lambda: record.edit_text(long_action, long_edit), MB),
        "record_id_surrogate_1mb": (
            lambda: record.make_record_id("t", "s", "x\udcff" * (MB // 2), SQL, ""), MB),
        "replay_edit_1mb": (lambda: edit_replay.replay_edit(long_action, long_edit,
                                                           long_action), MB),
        "replay_edit_at_its_bound": (
            lambda: edit_replay.replay_edit(*_replay_worst(edit_replay.MAX_REPLAY_CHARS)),
            edit_replay.MAX_REPLAY_CHARS),
        "sql_edits_60_deep": (lambda: sql_domain.sql_edits(deep + " WHERE a > 1", limit=4),
                              len(deep)),
        "sql_edits_1mb": (lambda: sql_domain.sql_edits(long_action, limit=4), MB),
        "derived_condition_sql_60_deep": (
            lambda: derive(sql_names.SQL_NAMES, deep, deep + " LIMIT 1", "db"),
            len(deep)),
        "derived_condition_sql_50k_deep": (
            lambda: derive(sql_names.SQL_NAMES, very_deep, very_deep + " LIMIT 1", "db"),
            len(very_deep)),
        "derived_condition_sql_at_its_size_bound": (
            lambda: derive(sql_names.SQL_NAMES, *at_bound, "db"), len(at_bound[0])),
        "derived_condition_sql_4kb_in_list": (
            lambda: derive(sql_names.SQL_NAMES, *wide, "db"), len(wide[0])),
        "derived_condition_sql_1mb": (
            lambda: derive(sql_names.SQL_NAMES, long_action, long_edit, "db"), MB),
        "derived_condition_code_1mb": (
            lambda: derive(TEXT_NAMES, long_action.replace(" ", "\n"),
                           long_edit.replace(" ", "\n"), ""), MB),
        "condition_check_1mb_spaces": (
            lambda: checker.check("bound == strict" + " " * MB + "x", task), MB),
        "condition_check_1mb_clauses": (
            lambda: checker.check(" and ".join(["bound == strict"] * (MB // 20)), task), MB),
        "condition_never_holds_1mb_spaces": (
            lambda: never_holds("a == b" + " " * MB + "and a == c"), MB),
        "condition_draft_has_on_1mb_draft": (
            lambda: checker.check("draft has [singer, age, w5]", task), MB),
        "text_embedding_1mb": (lambda: text_embedding.compute_embeddings([long_action]), MB),
    }


def _raises(fn, *args):
    """``fn(*args)``; a ``ParseError`` (a refused reply) is an outcome, not a failure."""
    from countermem_jax.method.prompting.parsers import ParseError
    try:
        return fn(*args)
    except ParseError:
        return None


def _in_lists(chars: int, nodes: int) -> tuple[str, str]:
    """A query with the longest IN list that ``chars`` and ``nodes`` allow (sqlglot's tree diff
    is slowest on wide trees; found by bisection), and the same query with one comparison
    changed."""
    import sqlglot

    def query(n: int) -> str:
        return "SELECT a FROM t WHERE b > 1 AND d IN (" + ", ".join(map(str, range(n))) + ")"

    def fits(n: int) -> bool:
        text = query(n)
        return len(text) <= chars and sum(
            1 for _ in sqlglot.parse_one(text, read="sqlite").walk()) <= nodes
    lo, hi = 1, chars
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return query(lo), query(lo).replace("b > 1", "b >= 1")


def _replay_worst(chars: int):
    """(original, improved, draft) at ``replay_edit``'s length bound with every token alike:
    each hunk's context matches everywhere, the costliest placement."""
    words = ("a " * (chars // 2))[:chars - 2]
    half = len(words) // 2
    improved = words[:half] + "b " + words[half + 2:]
    return words, improved, words


def _time_case(name: str, repeats: int, conn) -> None:
    """In the child: the best of ``repeats`` runs of case ``name``, sent back on ``conn``."""
    fn, _ = _case_inputs()[name]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    conn.send(best)


def time_case(name: str, repeats: int, timeout_s: float) -> float | None:
    """Seconds of case ``name`` (best of ``repeats``), or None when it ran past ``timeout_s``
    or failed."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_time_case, args=(name, repeats, child))
    proc.start()
    ready = parent.poll(timeout_s)
    seconds = parent.recv() if ready else None
    if proc.is_alive():
        proc.kill()
    proc.join()
    return seconds


def main(argv):
    """Times every case (or those matching ``--only``), one line each, then ``result:``."""
    del argv
    cases = {name: size for name, (_, size) in _case_inputs().items() if _ONLY.value in name}
    results, over = {}, []
    for name, size in cases.items():
        seconds = time_case(name, _REPEATS.value, _TIMEOUT.value)
        results[name] = seconds
        shown = f"{seconds:8.3f} s  ratio {seconds / BOUND_S:7.3f}" if seconds is not None \
            else f"> {_TIMEOUT.value:.0f} s (killed or failed)"
        if seconds is None or seconds > BOUND_S:
            over.append(name)
        print(f"{name:<44} {size / MB:6.2f} MB  {shown}", flush=True)
    timed = {k: v for k, v in results.items() if v is not None}
    slowest = max(timed, key=timed.get) if timed else None
    print_result({"cases": len(results), "bound_s": BOUND_S, "over_bound": over,
                  "slowest": slowest, "slowest_s": round(timed[slowest], 4) if slowest else None,
                  "seconds": {k: (round(v, 4) if v is not None else None)
                              for k, v in results.items()}})


if __name__ == "__main__":
    app.run(main)
