"""Issue 39, items 2 and 3: every parser and edit routine is bounded (depth, length) and refuses
what is too deep or too long for that step instead of raising or stalling; everything written
is UTF-8, and a store holding anything else is refused naming file, line and field. Speed on
1 MB inputs is measured by ``benchmarks/security/bounded_inputs.py``, not asserted
here."""
import difflib
import json
import random
import re

import pytest

from countermem_jax.method import bounded_diff, edit_replay, text_embedding
from countermem_jax.method.memory import record
from countermem_jax.method.memory.persistence import StoreFormatError, load_store, save_store
from countermem_jax.method.memory.store import MemoryStore
from countermem_jax.method.prompting import parsers
from countermem_jax.domains import sql_names
from countermem_jax.method.conditions import TaskFacts, derive, grammar
from countermem_jax.method.conditions import checkers as conditions
from countermem_jax.runtime.runlog import RunLog
from helpers import make_record, paper

DEEP = "SELECT " + "(" * 60 + "1" + ")" * 60


# --- bounded diffs ----------------------------------------------------------------------------
def _apply(a, b, ops):
    out = []
    for tag, i1, i2, j1, j2 in ops:
        out += a[i1:i2] if tag == "equal" else b[j1:j2]
    return out


@pytest.mark.parametrize("seed", range(20))
def test_bounded_diff_is_sequencematcher_within_its_bound(seed):
    rng = random.Random(seed)
    a = [rng.choice("abcde") for _ in range(rng.randint(0, 60))]
    b = [rng.choice("abcde") for _ in range(rng.randint(0, 60))]
    diff = bounded_diff.opcodes(a, b)
    assert diff.exact
    assert diff.opcodes == difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()


def test_bounded_diff_past_its_bound_is_a_valid_edit_script():
    a = [f"w{i % 7}" for i in range(3000)]
    b = a[:1000] + ["x"] * 900 + a[1800:]
    diff = bounded_diff.opcodes(a, b, max_cells=10_000)
    assert not diff.exact and _apply(a, b, diff.opcodes) == b
    assert diff.opcodes[0] == ("equal", 0, 1000, 0, 1000)
    small = a[:1500] + ["x"] + a[1500:]
    assert bounded_diff.opcodes(a, small, max_cells=10_000).changes == [
        ("insert", 1500, 1500, 1500, 1501)]


def test_a_change_too_long_to_align_is_not_a_local_edit():
    # 600 of 2,000 tokens replaced: under the removal bound, but its alignment is past the bound
    a = " ".join(f"t{i}" for i in range(2000))
    b = " ".join([f"t{i}" for i in range(700)] + [f"u{i}" for i in range(600)]
                 + [f"t{i}" for i in range(1300, 2000)])
    assert not parsers.is_local_edit(a, b)
    assert parsers.is_local_edit(a, a.replace("t1000", "changed"))


def test_the_locality_check_of_a_long_draft_judges_a_one_place_edit():
    from countermem_jax.method.locality import locality_problem
    long_sql = "SELECT a FROM t WHERE b > 1 LIMIT 0 -- " + "x y " * 20_000
    assert locality_problem(long_sql, long_sql.replace(" LIMIT 0", "", 1)) == ""


# --- FIND / REPLACE replies --------------------------------------------------------------------
# The pattern the linear reader replaced (quadratic on many FIND lines): its pairs are the spec.
_OLD_PAIRS = re.compile(r"FIND\s*:\s*(.+?)\s*\n\s*REPLACE\s*:\s*(.*?)(?=\n\s*(?:EDIT\b|FIND\s*:|"
                        r"\d+[.)]|$)|\Z)", re.I | re.S)


def test_edit_pairs_are_read_as_the_pattern_they_replace():
    pieces = ["FIND:", "find :", "REPLACE:", "replace :", "REPLACE\n:", "EDIT 1", "1.", "2)",
              "x", "y z", "\n", "\n\n", "  \n", " ", "\t", "a > 1", "EDITOR", "```"]
    rng = random.Random(0)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        old = [(parsers._unquote(f), parsers._unquote(r)) for f, r in _OLD_PAIRS.findall(text)]
        new = [(parsers._unquote(f), parsers._unquote(r)) for f, r in parsers._edit_pairs(text)]
        assert new == old, repr(text)


def test_only_the_first_edits_of_a_reply_are_read():
    action = "SELECT a FROM t WHERE b > 1"
    noise = "FIND: nowhere\nREPLACE: x\n" * parsers.MAX_EDITS_READ
    with pytest.raises(parsers.ParseError, match="does not occur"):
        parsers.parse_local_edits(noise + "FIND: b > 1\nREPLACE: b >= 1\n", action, 4)
    assert parsers.parse_local_edits("FIND: b > 1\nREPLACE: b >= 1\n" + noise, action, 4) == [
        "SELECT a FROM t WHERE b >= 1"]


def test_a_reply_of_many_find_lines_is_refused_with_a_reason():
    with pytest.raises(parsers.ParseError, match="no usable edit"):
        parsers.parse_local_edits("FIND: x\n" * 50_000, "SELECT a FROM t", 4)


def test_json_nested_past_the_parser_stack_is_a_broken_reply_not_a_crash():
    from countermem_jax.method.prompting import constraints
    deep = "[" * 100_000 + "]" * 100_000
    assert constraints.json_object(deep) is None
    assert constraints.violation(conditions.JUDGE_CONSTRAINT, deep) == \
        "the reply is not one JSON object"
    nested = {"verdict": "YES"}
    for _ in range(900):
        nested = {"x": nested}
    assert constraints.violation(conditions.JUDGE_CONSTRAINT, json.dumps(nested)) != ""
    with pytest.raises(parsers.ParseError, match="not followed by one JSON object"):
        parsers.parse_function_calls("CALL: " + "[" * 100_000, ("archival_memory_insert",))


def test_the_whitespace_tolerant_find_is_skipped_past_its_bound():
    action = "SELECT a\n  FROM t WHERE b > 1"
    assert parsers._locate("a FROM t", action) is not None
    assert parsers._locate("a FROM t", action + " " * parsers.LOCATE_CELLS) is None


# --- replay, conditions, SQL depth ---------------------------------------------------------------
def test_replay_refuses_an_action_past_its_length_bound():
    a, b = "SELECT a FROM t WHERE b > 1", "SELECT a FROM t WHERE b >= 1"
    assert edit_replay.replay_edit(a, b, a) == b
    long_draft = a + " -- " + "x" * edit_replay.MAX_REPLAY_CHARS
    assert edit_replay.replay_edit(a, b, long_draft) is None


def test_a_replay_refused_for_length_says_so_in_the_decision_log():
    import asyncio
    from countermem_jax.method.memory_use import CounterMemAugmentation
    a, b = "SELECT a FROM t WHERE b > 1", "SELECT a FROM t WHERE b >= 1"
    rec = make_record(original=a, improved=b)
    this = CounterMemAugmentation.__new__(CounterMemAugmentation)
    this.revision, this.calls = "replay", None   # no agent: no names hook
    for draft, expect in ((a, "replay"), ("SELECT c FROM u", "no_place"),
                          (a + " -- " + "x" * edit_replay.MAX_REPLAY_CHARS, "too_long")):
        log = {}
        asyncio.run(CounterMemAugmentation._revise(this, None, draft, rec, "", log))
        assert log["revision"] == expect


def test_replay_refuses_an_edit_of_more_hunks_than_its_bound():
    a = " ".join(f"w{i}" for i in range(40))
    b = " ".join(f"w{i}" if i % 4 else f"v{i}" for i in range(40))
    assert edit_replay.replay_edit(a, b, a) is None


def test_a_condition_from_a_60_deep_draft_is_derived_without_raising():
    condition = str(derive(sql_names.SQL_NAMES, DEEP, DEEP + " LIMIT 1", "db"))
    assert condition.startswith("environment == db")
    assert sql_names.sql_touched(DEEP, DEEP + " LIMIT 1") is None
    assert sql_names.SQL_NAMES.action_names(DEEP) is None
    assert sql_names.nesting_depth(DEEP) == 60


def test_the_reason_a_statement_is_read_as_text_is_named():
    # what construction logs as ``condition_from_text`` beside a record derived from such an edit
    assert sql_names.sql_refusal("SELECT a FROM t WHERE b > 1") == ""
    assert sql_names.sql_refusal("SELEC nonsense ((") == ""   # not SQL: not a refusal
    assert sql_names.sql_refusal(DEEP) == "nested deeper than 32"
    assert sql_names.sql_refusal("SELECT 1" + " " * 5000) == "longer than 4000 characters"
    wide = "SELECT a FROM t WHERE d IN (" + ", ".join(map(str, range(400))) + ")"
    assert sql_names.sql_refusal(wide) == "more than 160 parse nodes"


def test_a_statement_too_large_for_the_tree_diff_is_not_parsed():
    small = "SELECT a FROM t WHERE b > 1 AND d IN (1, 2, 3)"
    assert sql_names.sql_touched(small, small.replace("b > 1", "b >= 1")) is not None
    wide = "SELECT a FROM t WHERE b > 1 AND d IN (" + ", ".join(map(str, range(400))) + ")"
    assert len(wide) < sql_names.MAX_SQL_CHARS
    assert sql_names.sql_touched(wide, wide.replace("b > 1", "b >= 1")) is None
    assert sql_names.SQL_NAMES.action_names(wide) is None


def test_a_statement_sqlglot_parses_but_cannot_walk_gives_no_names():
    chain = "SELECT 1 WHERE " + "NOT " * 3000 + "1"
    assert sql_names.sql_touched(chain, chain + " LIMIT 1") is None


_OLD_SPLIT = re.compile(r"\s+(?:and|&&)\s+", re.I)


def test_the_clause_splitter_splits_as_the_pattern_it_replaced():
    rng = random.Random(1)
    pieces = [" ", "  ", "\t", "\n", "and", "AND", "&&", "x", "sand", "andy", "==", " and "]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        assert grammar._CLAUSE_SPLIT.split(text) == _OLD_SPLIT.split(text), repr(text)


def test_a_condition_with_a_long_run_of_spaces_is_judged():
    checker = conditions.RuleChecker()
    task = TaskFacts("t", "q", {"bound": "strict"})
    assert checker.check("bound == strict" + " " * 40_000 + "and bound != inclusive", task)


# --- UTF-8 everywhere written --------------------------------------------------------------------
def test_the_run_log_writes_a_lone_surrogate_as_a_replacement_character(tmp_path):
    log = RunLog(tmp_path / "log.jsonl")
    log.write("counterfactual", condition="x\udcff")
    text = (tmp_path / "log.jsonl").read_bytes().decode("utf-8")
    assert json.loads(text)["condition"] == "x\ufffd"


def test_record_ids_and_embeddings_take_a_lone_surrogate():
    assert len(record.make_record_id("t", "s\udcff", "a", "b", "")) == 20
    assert text_embedding.compute_embeddings(["x\udcff"]).shape[0] == 1


def _store_file(tmp_path, condition: str):
    store = MemoryStore(paper("store", capacity=10))
    store.propose(make_record(condition=condition))
    assert len(store) == 1
    return save_store(store, tmp_path / "store.jsonl")


def test_a_store_holding_a_lone_surrogate_is_refused_naming_line_and_field(tmp_path):
    path = _store_file(tmp_path, "x")
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"condition": "x"', '"condition": "x\\udcff"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreFormatError, match=r"store.jsonl:2: field 'condition': not valid "
                                               r"UTF-8"):
        load_store(path)


def test_a_store_with_an_escaped_surrogate_pair_loads(tmp_path):
    path = _store_file(tmp_path, "x 😀")
    lines = [json.dumps(json.loads(line), sort_keys=True) for line in path.read_text().splitlines()]
    assert "\\ud83d\\ude00" in lines[1]
    path.write_text("\n".join(lines) + "\n")
    assert load_store(path).records[0].condition == "x 😀"
