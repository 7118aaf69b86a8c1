r"""Study 9, benchmark breakdown (paper Appendix D.7, Figure 6 / Table 7): on each of the 12
benchmarks, ReAct and Reflexion each against its own CounterMem version with gpt-oss-120b:
score gain, call reduction and failure reduction per solved task; four-domain (equal domain
weight) and 12-benchmark (equal benchmark weight) summaries. Each cell uses its paper
setting's sizes (configs/paper.py SETTINGS) and all five selector seeds.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.study --config=configs/studies/breakdown.py --workdir=runs/study_breakdown
    python -m countermem_jax.report runs/study_breakdown --out runs/report_breakdown

Needs every benchmark's data and checker (docs/benchmarks.md);
--config.protocol.benchmarks='("spider","bird","smtlib","satlib")' runs the ones a CPU machine can
check, and the summaries then name what is missing.

Smallest command that runs here (CPU model; Spider only, ReAct; 5 construction tasks, 4 once the
held-out tasks' paraphrase twins are removed; 2 selector-training tasks, 1 validation task, a
4-decision selector; 4 held-out tasks):

    python -m countermem_jax.study --config=configs/studies/breakdown.py:cpu \
        --config.base.splits.n_build=5 --config.base.splits.n_train=2 \
        --config.base.splits.n_validation=1 --config.base.splits.n_eval=4 \
        --config.base.selector.total_decisions=4 --config.base.selector.learning_starts=2 \
        --config.base.selector.checkpoint_every=4 \
        --config.protocol.benchmarks='("spider",)' --config.protocol.agents='("react",)' \
        --workdir=/tmp/study_breakdown
    python -m countermem_jax.report /tmp/study_breakdown --out /tmp/report_breakdown
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies import protocols
from countermem_jax.domains import registry

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")


def get_config(arg=None):
    return protocols.paper_study(
        "breakdown", PAPER.study_base("cpu" if arg == "cpu" else None), PAPER.settings(),
        seeds=None,
        benchmarks=tuple(b.name for b in registry.paper_settings()),
        agents=("react", "reflexion"))
