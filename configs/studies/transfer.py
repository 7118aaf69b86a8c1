r"""Study 6, transfer (paper §5.3, Appendix D.4, Figure 3): CounterMem and ReasoningBank on 60
source–target pairs per condition — same environment / new task, new environment / new task,
same error / new surface, look-alike with a changed condition (targets from LOOK_ALIKE_TASK,
kept only when the applicability check confirms the record's condition is false and the gold
query derived by undoing the record's edit passes the checker) — each target run with only its
source's memory, beside the same target without memory. Spider with gpt-oss-120b, ReAct; 200
construction tasks give the sources, the 200 held-out tasks the ordinary targets.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.study --config=configs/studies/transfer.py --workdir=runs/study_transfer
    python -m countermem_jax.report runs/study_transfer --out runs/report_transfer

runs/study_transfer/cells/pairs/pairs.json lists every pair (source id, target id, target
request); study.json's notes say how many candidates each condition had and why look-alike
candidates were dropped.

Smallest command that runs here (CPU model on Spider; 5 construction tasks, 4 once the held-out
tasks' paraphrase twins are removed; 2 selector-training tasks, 1 validation task, a 4-decision
selector; 4 held-out tasks; 2 pairs per condition):

    python -m countermem_jax.study --config=configs/studies/transfer.py:cpu \
        --config.base.splits.n_build=5 --config.base.splits.n_train=2 \
        --config.base.splits.n_validation=1 --config.base.splits.n_eval=4 \
        --config.base.selector.total_decisions=4 --config.base.selector.learning_starts=2 \
        --config.base.selector.checkpoint_every=4 \
        --config.protocol.n_pairs=2 --workdir=/tmp/study_transfer
    python -m countermem_jax.report /tmp/study_transfer --out /tmp/report_transfer
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies import protocols

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")


def get_config(arg=None):
    return protocols.paper_study(
        "transfer", PAPER.study_base("cpu" if arg == "cpu" else None), PAPER.settings(),
        splits=dict(n_build=200, n_eval=200),
        methods=("countermem", "reasoningbank"), n_pairs=60, pair_seed=0)
