"""A record's checked edit made again on a new draft (method/edit_replay.py, paper §3.4)."""
from countermem_jax.domains.sql_names import SQL_NAMES
from countermem_jax.method.edit_replay import replay_edit

# The record of the poker_player database the CPU quickstart makes: the join that reaches the
# people table, verified on "the birth date of the player with the lowest earnings".
POKER = ("SELECT Birth_Date FROM poker_player ORDER BY Earnings ASC LIMIT 1",
         "SELECT people.Birth_Date FROM poker_player JOIN people ON poker_player.people_id = "
         "people.people_id ORDER BY Earnings ASC LIMIT 1")
JOIN = "JOIN people ON poker_player.people_id = people.people_id"


def test_the_boundary_fix_is_made_on_another_query():
    # §3.1's running example: the inclusive bound, on a query with another column and value.
    assert replay_edit("SELECT * FROM t WHERE age > 18", "SELECT * FROM t WHERE age >= 18",
                       "SELECT name FROM people WHERE age > 21 AND city = 'Oslo'") == \
        "SELECT name FROM people WHERE age >= 21 AND city = 'Oslo'"


def test_a_draft_without_the_mistake_gets_no_replay():
    assert replay_edit("SELECT * FROM t WHERE age > 18", "SELECT * FROM t WHERE age >= 18",
                       "SELECT name FROM people WHERE age < 21") is None


def test_the_join_and_the_qualifier_go_in_together_or_not_at_all():
    # The record qualifies Birth_Date and adds the join that makes it resolvable: a draft that
    # selects Birth_Date gets both; one that does not has no place for the qualifier, so the
    # record does not fit (the join alone would be half the correction).
    assert replay_edit(*POKER, "SELECT Birth_Date FROM poker_player WHERE Earnings > 300000") == \
        f"SELECT people.Birth_Date FROM poker_player {JOIN} WHERE Earnings > 300000"
    assert replay_edit(*POKER, "SELECT Name FROM poker_player WHERE Earnings > 300000") is None
    assert replay_edit(*POKER, "SELECT Name FROM poker_player") is None


def test_an_insertion_placed_by_one_shared_keyword_is_no_place():
    # "people." sits after SELECT in the record; a draft whose SELECT is followed by something
    # else (AVG(...)) is no place for it ("SELECT people.AVG(Earnings)" would be nonsense), and
    # without it the record does not fit.
    assert replay_edit(*POKER, "SELECT AVG(Earnings) FROM poker_player WHERE Height > 200") is None


def test_a_replay_makes_the_whole_edit_or_none():
    # count( has no place in a draft without DISTINCT; its closing parenthesis alone would have
    # made "SELECT Language) FROM ...".
    edit = ("SELECT DISTINCT Language FROM countrylanguage",
            "SELECT count(DISTINCT Language) FROM countrylanguage")
    draft = "SELECT Language FROM countrylanguage ORDER BY Percentage DESC LIMIT 1"
    assert replay_edit(*edit, draft) is None
    assert replay_edit(*edit, draft, names=SQL_NAMES) is None
    assert replay_edit(*edit, "SELECT DISTINCT Language FROM countrylanguage WHERE "
                       "IsOfficial = 'T'", names=SQL_NAMES) == \
        "SELECT count(DISTINCT Language) FROM countrylanguage WHERE IsOfficial = 'T'"


# The quickstart's tvshow record: the column read from the other table of the join.
TV = ("SELECT T1.Title FROM Cartoon AS T1 JOIN TV_Channel AS T2 ON T1.Channel = T2.id "
      "WHERE T2.Directed_by = 'Ben Jones'")
TV_FIXED = TV.replace("WHERE T2.Directed_by", "WHERE T1.Directed_by")


def test_a_qualifier_is_changed_only_before_the_column_it_qualified():
    # The only "T2." of the draft qualifies id in the join: changing it there would have made
    # "ON T1.Channel = T1.id", another meaning altogether.
    draft = ("SELECT T1.Title FROM Cartoon AS T1 JOIN TV_Channel AS T2 ON T1.Channel = T2.id "
             "WHERE T1.Written_by = 'Todd Casey'")
    assert replay_edit(TV, TV_FIXED, draft) is None
    assert replay_edit(TV, TV_FIXED, draft,
                       feedback="SQL error: OperationalError: no such column: T2") is None
    same = draft.replace("T1.Written_by", "T2.Directed_by")
    assert replay_edit(TV, TV_FIXED, same) == same.replace("T2.Directed_by", "T1.Directed_by")


def test_an_alias_is_changed_only_after_the_table_it_named():
    # The record renamed the alias of pets; the draft's only "AS T2" names cars.
    edit = ("SELECT T2.name FROM people AS T1 JOIN pets AS T2 ON T1.id = T2.owner",
            "SELECT T2.name FROM people AS T1 JOIN pets AS T3 ON T1.id = T2.owner")
    assert replay_edit(*edit, "SELECT T2.age FROM cars AS T2 WHERE T2.x = 1") is None


def test_a_replay_that_does_not_parse_is_no_replay_where_the_domain_can_tell():
    # Every hunk has its place, but "age DESC ASC" is no SQL: the SQL domain refuses it; a
    # domain that cannot tell (no names hook) keeps the text.
    edit = ("SELECT name FROM t ORDER BY age LIMIT 1", "SELECT name FROM t ORDER BY age DESC LIMIT 1")
    draft = "SELECT name FROM t ORDER BY age ASC, id LIMIT 3"
    assert replay_edit(*edit, draft) == "SELECT name FROM t ORDER BY age DESC ASC, id LIMIT 3"
    assert replay_edit(*edit, draft, names=SQL_NAMES) is None
    assert replay_edit(*edit, "SELECT name FROM t ORDER BY age LIMIT 3", names=SQL_NAMES) == \
        "SELECT name FROM t ORDER BY age DESC LIMIT 3"
    # past the parse bounds the domain cannot tell: nothing is refused for it
    assert SQL_NAMES.parses("SELECT " + "(" * 40 + "1" + ")" * 40) is None
    assert SQL_NAMES.parses("SELECT a) FROM t") is False


def test_the_same_wrong_name_is_changed_everywhere_the_checker_named_it():
    # No context of the record's "ORDER BY PetAge" is in the draft; the draft's own error names
    # PetAge, so both uses of it change.
    args = ("SELECT PetType FROM Pets ORDER BY PetAge", "SELECT PetType FROM Pets ORDER BY pet_age",
            "SELECT AVG(PetAge), MAX(PetAge) FROM Pets GROUP BY PetType")
    assert replay_edit(*args, feedback="SQL error: OperationalError: no such column: PetAge") == \
        "SELECT AVG(pet_age), MAX(pet_age) FROM Pets GROUP BY PetType"
    assert replay_edit(*args) is None      # before any feedback: no place for it


def test_a_swapped_table_is_not_swapped_into_every_query_that_reads_it():
    # The record replaced car_names by model_list in its own query; a draft that reads
    # car_names for another reason (its error names Weight) keeps it.
    assert replay_edit("SELECT count(car_names.Model) FROM car_makers JOIN car_names ON x = y",
                       "SELECT count(model_list.Model) FROM car_makers JOIN model_list ON x = y",
                       "SELECT DISTINCT Year FROM car_names WHERE Weight > 3000",
                       feedback="SQL error: OperationalError: no such column: Weight") is None


def test_context_chooses_among_several_occurrences():
    # Two ">" in the draft; only the one after "age" is the record's.
    assert replay_edit("SELECT * FROM t WHERE age > 18", "SELECT * FROM t WHERE age >= 18",
                       "SELECT name FROM people WHERE salary > 10 AND age > 21") == \
        "SELECT name FROM people WHERE salary > 10 AND age >= 21"


def test_an_edit_with_no_place_in_the_draft_gives_none():
    assert replay_edit(*POKER, "SELECT count(*) FROM people") is None
    assert replay_edit("a", "a", "a") is None                    # no edit at all


def test_tokens_are_compared_without_case_and_spacing_follows_the_record():
    assert replay_edit("select x from t order by petage asc",
                       "select x from t order by pets.pet_age asc",
                       "SELECT PetID FROM Pets\nORDER BY PetAge DESC") == \
        "SELECT PetID FROM Pets\nORDER BY pets.pet_age DESC"
