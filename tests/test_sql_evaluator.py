"""The SQL world model on the real Spider databases (paper §3.2, Appendix D.1)."""
import dataclasses
import hashlib
import json
import pathlib
import re

import pytest

from evaluators.sql import SQLEvaluator, load_bird, load_spider
from evaluators.sql.checker import results_match, without_distinct
from evaluators.sql.features import question_features
from evaluators.sql.loaders import DataError, build_schema_only_db


@pytest.fixture(scope="module")
def spider(benchdata):
    return {t.task_id: t for t in load_spider(benchdata / "spider")}


@pytest.fixture(scope="module")
def evaluator():
    return SQLEvaluator(timeout_s=5.0)


def _hashes(benchdata):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((benchdata / "spider" / "database").glob("*/*.sqlite"))}


def test_every_gold_query_scores_one(spider, evaluator):
    failures = [tid for tid, t in spider.items()
                if not evaluator.evaluate(evaluator.reset(t), t.reference.gold_sql).success]
    assert len(spider) > 500 and failures == []


@pytest.mark.parametrize("task_id,wrong", [
    ("spider/concert_singer/24", "SELECT T2.name ,  T2.capacity FROM concert AS T1 JOIN stadium AS T2 "
     "ON T1.stadium_id  =  T2.stadium_id WHERE T1.year  >  2014 GROUP BY T2.stadium_id ORDER BY "
     "count(*) DESC LIMIT 1"),                                       # boundary > instead of >=
    ("spider/concert_singer/8", "SELECT country FROM singer WHERE age  <  20"),  # boundary flipped
    ("spider/pets_1/55", "SELECT count(*) FROM pets WHERE pet_age > 100"),  # wrong filter
])
def test_known_wrong_queries_score_zero(spider, evaluator, task_id, wrong):
    outcome = evaluator.evaluate(evaluator.reset(spider[task_id]), wrong)
    assert outcome.completed and not outcome.success and outcome.utility == 0.0
    assert outcome.failed_attempt


def test_feedback_shows_prediction_never_gold(spider, evaluator):
    task = spider["spider/concert_singer/8"]
    gold_rows = evaluator.gold_result(task.reference)[0]
    outcome = evaluator.evaluate(evaluator.reset(task), "SELECT name FROM singer")
    assert "returned 6 rows" in outcome.feedback
    assert task.reference.gold_sql not in outcome.feedback
    assert all(repr(row) not in outcome.feedback for row in gold_rows)
    assert len(outcome.feedback) <= 800


def test_sql_error_is_a_completed_failure(spider, evaluator):
    outcome = evaluator.evaluate(evaluator.reset(spider["spider/pets_1/55"]), "SELECT nope FROM pets")
    assert outcome.completed and not outcome.success
    assert "SQL error" in outcome.feedback and "no such column" in outcome.feedback


def _adversarial_actions():
    tables = {"concert_singer": "singer", "pets_1": "pets", "car_1": "cars_data",
              "employee_hire_evaluation": "employee", "museum_visit": "museum"}
    templates = [
        "DELETE FROM {t}", "DROP TABLE {t}", "UPDATE {t} SET rowid = rowid + 1",
        "INSERT INTO {t} DEFAULT VALUES", "CREATE TABLE evil(x)", "ALTER TABLE {t} RENAME TO x",
        "ATTACH DATABASE '/tmp/countermem_evil.db' AS evil", "PRAGMA writable_schema = 1",
        "PRAGMA journal_mode = WAL", "PRAGMA user_version = 7", "VACUUM", "REINDEX", "ANALYZE",
        "SELECT 1; DROP TABLE {t}", "SELECT * FROM {t}; DELETE FROM {t}",
        "CREATE TRIGGER tr AFTER INSERT ON {t} BEGIN DELETE FROM {t}; END",
        "REPLACE INTO {t} SELECT * FROM {t}", "CREATE INDEX ix ON {t}(rowid)",
        "BEGIN; DELETE FROM {t}; COMMIT", "SELECT load_extension('/tmp/x.so')",
        "WITH x AS (SELECT 1) DELETE FROM {t}", "CREATE VIEW v AS SELECT * FROM {t}",
        "INSERT INTO {t} SELECT * FROM {t}", "DETACH DATABASE main", "SAVEPOINT a",
        "SELECT writefile('/tmp/countermem_evil', 'x')", "PRAGMA foreign_keys = OFF",
        "UPDATE {t} SET rowid = NULL WHERE 1", "DROP VIEW IF EXISTS v", "DELETE FROM sqlite_master",
        "CREATE TEMP TABLE t AS SELECT * FROM {t}", "SELECT * FROM {t} WHERE 1=1 --'; DROP TABLE {t}",
        "INSERT OR REPLACE INTO {t}(rowid) VALUES (1)", "PRAGMA main.page_size = 1024",
        "PRAGMA incremental_vacuum",
    ]
    actions = [(db, tpl.format(t=t)) for tpl in templates for db, t in tables.items()]
    assert len(actions) >= 175
    actions += [("concert_singer", f"DELETE FROM singer WHERE singer_id = {i}") for i in range(25)]
    return actions[:200]


def test_200_adversarial_actions_leave_every_database_byte_identical(benchdata, spider, evaluator):
    before = _hashes(benchdata)
    by_db = {}
    for t in spider.values():
        by_db.setdefault(t.environment, t)
    actions = _adversarial_actions()
    assert len(actions) == 200
    for db, sql in actions:
        outcome = evaluator.evaluate(evaluator.reset(by_db[db]), sql)
        assert not outcome.success, sql
        assert outcome.completed, (sql, outcome.feedback)
    assert _hashes(benchdata) == before
    assert not pathlib.Path("/tmp/countermem_evil.db").exists()
    assert not pathlib.Path("/tmp/countermem_evil").exists()


def test_cartesian_join_bomb_is_stopped_at_its_deadline(spider):
    evaluator = SQLEvaluator(timeout_s=0.5)
    task = spider["spider/concert_singer/8"]
    bomb = "SELECT count(*) FROM singer a, singer b, singer c, singer d, singer e, singer f, " \
           "singer g, singer h, singer i, singer j"
    outcome = evaluator.evaluate(evaluator.reset(task), bomb)
    assert not outcome.completed and outcome.reason == "timeout"
    assert outcome.wall_time < 3.0
    # The connection stays usable afterwards.
    assert evaluator.evaluate(evaluator.reset(task), task.reference.gold_sql).success


@pytest.mark.parametrize("sql,message", [
    ("SELECT zeroblob(1000000000)", "too big"),
    ("SELECT randomblob(1000000000)", "too big"),
    ("SELECT printf('%.*c', 1000000000, 'x')", "precision above"),  # ~17 s in SQLite unguarded
    ("SELECT replace(hex(zeroblob(400000000)), '0', 'xx')", "too big"),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) "
     "SELECT randomblob(7000000) FROM c", "larger than 64 MB"),
], ids=["zeroblob", "randomblob", "printf-padding", "hex-zeroblob", "rows-of-7mb-blobs"])
def test_huge_values_stop_quickly_within_a_memory_cap(spider, sql, message):
    evaluator = SQLEvaluator(timeout_s=3.0)
    hwm_mb = lambda: int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) >> 10
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # peak RSS := current RSS (the suite may already hold a model)
    before = hwm_mb()
    outcome = evaluator.evaluate(evaluator.reset(spider["spider/concert_singer/8"]), sql)
    peak_mb = hwm_mb() - before
    assert outcome.completed and not outcome.success and message in outcome.feedback
    assert outcome.wall_time < 3.0 and peak_mb < 400


def test_guarded_printf_keeps_sqlite_results(spider, evaluator):
    task = spider["spider/concert_singer/8"]
    sql = "SELECT printf('%5.2f|%d|%s%%|%.*c', 3.14159, 7, 'ab', 3, 'x'), format('%*d', 4, 1)"
    assert evaluator.run_query(task.reference.db_path, sql) == [(" 3.14|7|ab%|xxx", "   1")]


def test_evaluation_does_not_change_the_state(spider, evaluator):
    state = evaluator.reset(spider["spider/pets_1/55"])
    snapshot = (state.task, state.attempts)
    for sql in ("SELECT 1", "DROP TABLE pets", state.task.reference.gold_sql):
        evaluator.evaluate(state, sql)
    assert (state.task, state.attempts) == snapshot


def test_distinct_is_removed_from_both_queries_as_spiders_official_evaluation_does(
        spider, evaluator):
    """test-suite-sql-eval's ``eval_exec_match`` (default, no --keep_distinct) drops every
    DISTINCT from the predicted and the gold query before it compares their results."""
    unordered = spider["spider/concert_singer/8"]            # SELECT DISTINCT country ...
    pets = spider["spider/pets_1/55"]                        # SELECT count(DISTINCT pettype) ...
    assert "DISTINCT" in unordered.reference.gold_sql and "DISTINCT" in pets.reference.gold_sql
    for task, sql in ((unordered, "SELECT country FROM singer WHERE age  >  20"),
                      (pets, "SELECT count(pettype) FROM pets")):
        outcome = evaluator.evaluate(evaluator.reset(task), sql)
        assert outcome.success
        kept = SQLEvaluator(keep_distinct=True)              # the official flag, off by default
        assert not kept.evaluate(kept.reset(task), sql).success
    # The case of issue 36: a reference that counts rows makes no correction of a candidate that
    # counts distinct values; to the official evaluator both are one answer.
    task = dataclasses.replace(pets, reference=dataclasses.replace(
        pets.reference, gold_sql="SELECT count(pettype) FROM pets"))
    outcome = evaluator.evaluate(evaluator.reset(task), "SELECT count(DISTINCT pettype) FROM pets")
    assert outcome.success
    assert "returned 1 rows" in outcome.feedback    # the candidate's own result, as written
    # A 'distinct' in a string or a quoted name is not the keyword.
    assert without_distinct("SELECT DISTINCT 'distinct', \"distinct\" FROM t") == \
        "SELECT  'distinct', \"distinct\" FROM t"
    assert without_distinct("SELECT count(DISTINCT a) FROM t") == "SELECT count( a) FROM t"


def _ordered_twins(spider):
    """The same question twice, its reference with and without a top-level ORDER BY."""
    task = spider["spider/concert_singer/8"]
    plain = dataclasses.replace(task, reference=dataclasses.replace(
        task.reference, gold_sql="SELECT name FROM singer WHERE age > 30"))
    ordered = dataclasses.replace(task, reference=dataclasses.replace(
        task.reference, gold_sql="SELECT name FROM singer WHERE age > 30 ORDER BY name"))
    return plain, ordered


@pytest.mark.parametrize("candidate", [
    "SELECT name FROM singer",                                   # wrong under both references
    "SELECT name FROM singer WHERE age > 30 ORDER BY name",      # right under both
    "SELECT nope FROM singer",                                   # an error
])
def test_the_same_candidate_gets_the_same_feedback_whether_or_not_the_reference_orders(
        spider, candidate):
    """Feedback says nothing derived from the reference beyond the verdict: the row-order rule
    is stated alike for every question in the instructions, not in feedback."""
    evaluator = SQLEvaluator(timeout_s=5.0)
    plain, ordered = _ordered_twins(spider)
    a = evaluator.evaluate(evaluator.reset(plain), candidate)
    b = evaluator.evaluate(evaluator.reset(ordered), candidate)
    assert (a.success, a.feedback) == (b.success, b.feedback)
    assert "order" not in a.feedback.lower()


def test_the_row_order_rule_is_in_every_sql_tasks_instructions():
    from countermem_jax.domains import SQL
    assert "row order counts only where the question asks" in SQL.instructions


def test_order_matters_only_when_gold_orders(spider, evaluator):
    ordered = spider["spider/concert_singer/2"]  # ORDER BY age DESC
    reversed_sql = ordered.reference.gold_sql.replace("DESC", "ASC")
    assert not evaluator.evaluate(evaluator.reset(ordered), reversed_sql).success
    unordered = spider["spider/concert_singer/8"]
    assert evaluator.evaluate(evaluator.reset(unordered),
                              "SELECT DISTINCT country FROM singer WHERE age > 20 ORDER BY country DESC"
                              ).success
    assert results_match([(1,), (1,), (2,)], [(2,), (1,), (1,)], "spider", ordered=False)
    assert not results_match([(1,), (2,)], [(1,), (1,), (2,)], "spider", ordered=False)
    assert results_match([(1,), (2,)], [(1,), (1,), (2,)], "bird", ordered=False)


def test_agent_sees_question_schema_and_db_but_not_gold(spider):
    task = spider["spider/concert_singer/8"]
    text = task.visible_text()
    assert task.prompt in text and "Database: concert_singer" in text and "CREATE TABLE" in text
    assert task.reference.gold_sql not in text


def test_question_features_for_conditions():
    assert question_features("Singers aged at least 30")["bound"] == "inclusive"
    assert question_features("Singers strictly above 30")["bound"] == "strict"
    assert question_features("How many different countries?")["distinct"] is True
    assert question_features("List all singers")["bound"] == "none"


def test_missing_spider_file_is_clear(tmp_path):
    with pytest.raises(DataError, match="dev.json: file not found"):
        load_spider(tmp_path)


def test_bird_loader_with_schema_only_databases(benchdata, tmp_path):
    bird = benchdata / "bird_minidev"
    entries = json.loads((bird / "mini_dev_sqlite.json").read_text())
    db_ids = sorted({e["db_id"] for e in entries})[:2]
    for db in db_ids:
        build_schema_only_db(bird / "schemas_arcwise_annotated_ddl" / f"{db}.sql",
                             tmp_path / db / f"{db}.sqlite")
    tasks = load_bird(bird / "mini_dev_sqlite.json", tmp_path, db_ids=set(db_ids))
    assert tasks and {t.environment for t in tasks} == set(db_ids)
    assert all(t.benchmark == "bird" and "Evidence:" in t.context for t in tasks if t.context)
    evaluator = SQLEvaluator()
    assert all(evaluator.evaluate(evaluator.reset(t), t.reference.gold_sql).success for t in tasks)
    with pytest.raises(DataError, match="download the BIRD dev databases"):
        load_bird(bird / "mini_dev_sqlite.json", tmp_path / "nowhere")


def test_spider_matches_results_up_to_a_permutation_of_columns():
    gold = [(1, "a", 2.5), (2, "b", 3.5), (2, "b", 3.5)]
    permuted = [(r[2], r[0], r[1]) for r in gold]
    assert results_match(permuted, gold, "spider", ordered=False)
    assert results_match(list(reversed(permuted)), gold, "spider", ordered=False)
    assert results_match(permuted, gold, "spider", ordered=True)
    assert not results_match(list(reversed(permuted)), gold, "spider", ordered=True)
    assert not results_match(permuted[:2], gold, "spider", ordered=False)  # multiset, not set
    # Rows mixed across columns are not a permutation of the columns.
    assert not results_match([(1, "b"), (2, "a")], [(1, "a"), (2, "b")], "spider", False)
    wide = [(i, i * 10, f"n{i}", i * 100, i % 2) for i in range(30)]
    assert results_match([(r[3], r[2], r[4], r[0], r[1]) for r in wide], wide, "spider", False)


def test_bird_keeps_its_set_comparison_with_columns_as_they_come():
    gold = [(1, "a"), (2, "b")]
    assert not results_match([("a", 1), ("b", 2)], gold, "bird", ordered=False)
    assert results_match([(2, "b"), (1, "a"), (1, "a")], gold, "bird", ordered=False)


def test_column_permuted_answer_passes_the_spider_checker(spider, evaluator):
    task = next(t for t in spider.values() if t.environment == "concert_singer")
    ref = dataclasses.replace(task.reference, gold_sql="SELECT name, country FROM singer")
    task = dataclasses.replace(task, reference=ref)
    assert evaluator.evaluate(evaluator.reset(task), "SELECT country, name FROM singer").success
    bird = dataclasses.replace(task, reference=dataclasses.replace(ref, comparison="bird"))
    assert not evaluator.evaluate(evaluator.reset(bird), "SELECT country, name FROM singer").success


def test_an_empty_reference_result_is_marked_never_told(spider, evaluator):
    task = spider["spider/concert_singer/14"]
    outcome = evaluator.evaluate(evaluator.reset(task), "SELECT name FROM singer WHERE 0")
    assert outcome.success and outcome.details["reference_empty"]
    assert "empty" not in outcome.feedback.lower()
    other = next(t for t in spider.values() if t.task_id == "spider/concert_singer/0")
    assert "reference_empty" not in evaluator.evaluate(evaluator.reset(other), "SELECT 1").details
