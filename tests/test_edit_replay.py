"""A record's checked edit made again on a new draft (method/edit_replay.py, paper §3.4)."""
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


def test_the_join_is_inserted_where_the_draft_reads_the_same_table():
    # The record's column (Birth_Date) is not in the draft: its qualification is left out, the
    # join that makes Name resolvable goes in after the draft's own FROM poker_player.
    assert replay_edit(*POKER, "SELECT Name FROM poker_player WHERE Earnings > 300000") == \
        f"SELECT Name FROM poker_player {JOIN} WHERE Earnings > 300000"
    assert replay_edit(*POKER, "SELECT Name FROM poker_player") == \
        f"SELECT Name FROM poker_player {JOIN}"


def test_an_insertion_placed_by_one_shared_keyword_is_left_out():
    # "people." sits after SELECT in the record; a draft whose SELECT is followed by something
    # else (AVG(...)) is no place for it: "SELECT people.AVG(Earnings)" would be nonsense.
    replayed = replay_edit(*POKER, "SELECT AVG(Earnings) FROM poker_player WHERE Height > 200")
    assert replayed == f"SELECT AVG(Earnings) FROM poker_player {JOIN} WHERE Height > 200"


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
