r"""Study 5, accumulation (paper §5.2 (a–c), Appendix D.3): CounterMem and ReasoningBank with
store snapshots after 0, 25, 50, 100 and 200 processed source tasks, five source-task orderings,
one selector trained once and reused unchanged at every snapshot; held-out score, retrieval and
context tokens per task, regression on the first 25 source tasks of each ordering.

Real size (gpt-oss-120b on vLLM, Spider, ReAct; 200 construction tasks, 100 held-out tasks):

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.study --config=configs/studies/accumulation.py --workdir=runs/study_accumulation
    python -m countermem_jax.report runs/study_accumulation --out runs/report_accumulation

Cells land in runs/study_accumulation/cells/<method>/order<o>/n<n>/ (ordinary workdirs), the
numbers behind the figure in runs/study_accumulation/study.json.

Smallest command that runs here (CPU model on Spider; 5 construction tasks, 4 once the held-out
tasks' paraphrase twins are removed; 2 selector-training tasks, 1 validation task, 4 held-out
tasks, a 4-decision selector; snapshots after 0, 2 and 4 source tasks, one ordering):

    python -m countermem_jax.study --config=configs/studies/accumulation.py:cpu \
        --config.base.splits.n_build=5 --config.base.splits.n_train=2 \
        --config.base.splits.n_validation=1 --config.base.splits.n_eval=4 \
        --config.base.selector.total_decisions=4 --config.base.selector.learning_starts=2 \
        --config.base.selector.checkpoint_every=4 --config.protocol.checkpoints='(0,2,4)' \
        --config.protocol.regression_tasks=2 --config.protocol.orderings=1 \
        --workdir=/tmp/study_accumulation
    python -m countermem_jax.report /tmp/study_accumulation --out /tmp/report_accumulation
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies import protocols

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")


def get_config(arg=None):
    return protocols.paper_study(
        "accumulation", PAPER.study_base("cpu" if arg == "cpu" else None), PAPER.settings(),
        splits=dict(n_build=200, n_eval=100),
        checkpoints=(0, 25, 50, 100, 200), orderings=5, ordering_seed=0,
        methods=("countermem", "reasoningbank"), regression_tasks=25)
