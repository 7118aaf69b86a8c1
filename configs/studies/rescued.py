r"""Study 7, rescued and broken tasks (paper Appendix E.3, Figure 8a): CounterMem and
ReasoningBank, each against the same ReAct agent without memory on 120 paired held-out tasks
per domain (Math: miniF2F, Coding: SWE-bench Verified, Text-to-SQL: Spider, Formal:
DafnyBench, SAT: SATLIB), gpt-oss-120b.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.study --config=configs/studies/rescued.py --workdir=runs/study_rescued
    python -m countermem_jax.report runs/study_rescued --out runs/report_rescued

Needs each benchmark's data (python -m countermem_jax.data fetch <name>) and its checker (Lean
4 for miniF2F, Dafny 4 for DafnyBench); --config.protocol.benchmarks='("spider","satlib")' runs the
domains this machine can check. A benchmark with fewer than 120 held-out tasks available is
refused with the number it has (the shared SATLIB copy has 110 tasks in all).

Smallest command that runs here (CPU model; Spider only; 5 construction tasks, 4 once the held-out
tasks' paraphrase twins are removed; 2 selector-training tasks, 1 validation task, a 4-decision
selector; 4 paired held-out tasks):

    python -m countermem_jax.study --config=configs/studies/rescued.py:cpu \
        --config.base.splits.n_build=5 --config.base.splits.n_train=2 \
        --config.base.splits.n_validation=1 \
        --config.base.selector.total_decisions=4 --config.base.selector.learning_starts=2 \
        --config.base.selector.checkpoint_every=4 \
        --config.protocol.benchmarks='("spider",)' --config.protocol.n_paired=4 \
        --workdir=/tmp/study_rescued
    python -m countermem_jax.report /tmp/study_rescued --out /tmp/report_rescued
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies import protocols

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")


def get_config(arg=None):
    return protocols.paper_study(
        "rescued", PAPER.study_base("cpu" if arg == "cpu" else None), PAPER.settings(),
        benchmarks=("minif2f", "swebench", "spider", "dafnybench", "satlib"),
        methods=("countermem", "reasoningbank"), n_paired=120)
