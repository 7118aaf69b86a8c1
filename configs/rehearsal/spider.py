r"""The GPU recipe's Spider setting, shrunk for the CPU rehearsal (launch/rehearse_gpu_host.sh).

    python -m countermem_jax.build_memory --config=configs/rehearsal/spider.py:gptoss --workdir=...

The argument is ``backbone[,small]``: ``gptoss`` is ``configs/paper.py:spider,react,gptoss``
(the served model name openai/gpt-oss-120b, a URL file, constraints, the waves and concurrency
sized from the URL file) with only its size changed: a few tasks, decisions and tokens, over four
Spider databases, three with a short schema and one with a long one (student_transcripts_tracking,
whose prompts do not fit the rehearsal server's context: over-long prompts in the phases). ``api`` is
``spider,react,api`` (a hosted API, its own URL and key) pointed at the loopback stand-in whose
URL is in $COUNTERMEM_REHEARSAL_API_URL, its key read from $REHEARSAL_API_KEY. ``small`` is the
test's variant (tests/test_rehearsal.py): the fewest tasks, tiny budgets.
"""
import os
import pathlib

from countermem_jax.protocol import config_files

PAPER = pathlib.Path(__file__).parents[1] / "paper.py"

# three short schemas and a long one: the split draws take tasks of several
DATABASES = ("singer", "concert_singer", "pets_1", "student_transcripts_tracking")


def get_config(arg="gptoss"):
    backbone, _, variant = arg.partition(",")
    if backbone not in ("gptoss", "api") or variant not in ("", "small"):
        raise ValueError(f"configs/rehearsal/spider.py takes gptoss|api[,small], not {arg!r}")
    small = variant == "small"
    c = config_files.load_module(PAPER).get_config(f"spider,react,{backbone}")
    c.data.db_ids = DATABASES
    c.splits.update(n_build=2 if small else 8, n_train=2 if small else 6, n_validation=1,
                    n_eval=2 if small else 6, n_build_envs=4, n_eval_envs=4)
    c.agent.update(max_tokens=24 if small else 96, max_attempts=2, temperature=0.0)
    c.memory.judge.max_tokens = 16 if small else 32
    c.construction.update(verification_budget=1 if small else 2, k=2)
    c.selector.update(total_decisions=2 if small else 12, learning_starts=1, batch_size=2,
                      train_every=1, target_sync_every=2, checkpoint_every=2,
                      wave_size=2, seeds=(0,))
    c.eval.seeds = (0,)
    # a replica that is gone is retried until its replacement is in the URL file
    c.backbone.max_attempts = 10
    c.backbone.timeout_s = 300.0
    if backbone == "api":
        c.backbone.base_urls = os.environ.get("COUNTERMEM_REHEARSAL_API_URL",
                                              "http://127.0.0.1:9/v1")
        c.backbone.api_key_env = "REHEARSAL_API_KEY"
    return c
