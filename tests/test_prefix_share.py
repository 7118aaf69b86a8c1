"""Prompts laid out for a server's prefix cache (vLLM's): what a database's questions share
(its schema) opens every SQL prompt of the method, what varies (question, draft, feedback)
follows; and the pipeline benchmark's count of prompt characters that repeat an earlier
prompt's prefix."""
import types

from countermem_jax.domains.sql import SQL
from countermem_jax.method.prompting import prompts
from countermem_jax.tools.speed import prefix_share

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
