"""Prompts laid out for a server's prefix cache (vLLM's): what a database's questions share
(its schema) opens every SQL prompt of the method, what varies (question, draft, feedback)
follows; and the pipeline benchmark's count of prompt characters that repeat an earlier
prompt's prefix."""
import types

from countermem_jax.domains.sql import SQL
from countermem_jax.method.prompting import prompts
from benchmarks.speed import prefix_share

SCHEMA = "Database: pets_1\nSchema:\nCREATE TABLE Student (StuID INTEGER, Age INTEGER);\n" * 8


def _task(question):
    return types.SimpleNamespace(context=SCHEMA, prompt=question)


def test_a_databases_questions_share_their_schema_as_the_prompts_prefix():
    """Every method template opens with the task header, context first; two questions of one
    database share at least the whole schema, whatever the template."""
    method = (prompts.DRAFT_ACTION, prompts.REVISE_WITH_RECORD,
              prompts.GENERATE_LOCAL_ALTERNATIVES, prompts.DISTIL_RECORD,
              prompts.REFLEXION_REFLECT)
    fields = dict(instructions=SQL.instructions, history="", draft="SELECT 1", record="r",
                  action="SELECT 1", feedback="wrong", k=4, unit="predicate", original="a",
                  improved="b", evidence="e", condition_hint="")
    for template in method:
        assert template.user.startswith(prompts.TASK_HEAD) and not template.system
        texts = [prefix_share.prompt_text(template.messages(**prompts.task_fields(_task(q)),
                                                        **fields))
                 for q in ("How many students are there?", "What is the oldest age?")]
        shared = prefix_share.PrefixShare._common(*texts)
        assert shared >= len(SCHEMA) and texts[0][shared:].startswith(
            "How many"), template.name


def test_the_prefix_share_counts_each_prompts_longest_prefix_with_any_earlier_one():
    share = prefix_share.PrefixShare()
    for text in ("abcdef", "xyz", "abcxyz", "abcdeq", "xy"):
        share.add(text)
    # 0 + 0 + 3 (abc) + 5 (abcde) + 2 (xy) of 6 + 3 + 6 + 6 + 2
    assert (share.shared, share.total) == (10, 23)
    assert share.pct == round(100 * 10 / 23, 1)
    assert prefix_share.PrefixShare().pct is None


def test_a_tasks_judge_calls_share_the_instruction_and_the_task_as_their_prefix():
    """The condition judge asks once per condition for a task: the fixed instruction and the
    task open the prompt, the condition comes last, so all but what differs is shared (the
    condition first left only the instruction in common: 49 % of evaluation's judge prompt
    characters on the pipeline benchmark, 86 % with this layout)."""
    from countermem_jax.method.conditions.checkers import LLMJudgeChecker
    task = "How many students are older than 20 and live in a dormitory with a TV lounge?"
    texts = [LLMJudgeChecker.PROMPT.format(task=task, condition=c)
             for c in ("the question counts rows", "the question is about the pets_1 database")]
    shared = prefix_share.PrefixShare._common(*texts)
    assert texts[0][:shared].endswith(f"<task>\n{task}\n</task>\n<condition>\nthe question ")
    assert len(texts[0]) - shared < 30


def test_a_revision_opens_with_the_tasks_first_draft_prompt_whole():
    """The revision's prompt repeats the task's first draft prompt (header and instruction) and
    then the record, with the draft last: what a server cached for the draft serves the
    revision (the draft first left only the header in common)."""
    task = _task("How many students are there?")
    fields = dict(instructions=SQL.instructions, **prompts.task_fields(task))
    draft = prefix_share.prompt_text(prompts.DRAFT_ACTION.messages(history="", **fields))
    revision = prefix_share.prompt_text(prompts.REVISE_WITH_RECORD.messages(
        draft="SELECT count(*) FROM Student", record="r", **fields))
    assert revision.startswith(draft)
    assert revision.index("\nr\n") < revision.index("SELECT count(*) FROM Student")
