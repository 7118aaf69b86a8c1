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

Smallest command that runs here (CPU model; Spider and SATLIB, 20 paired tasks each):

    python -m countermem_jax.study --config=configs/studies/rescued.py:cpu \
        --config.protocol.benchmarks='("spider","satlib")' --config.protocol.n_paired=20 \
        --workdir=/tmp/study_rescued
"""
from countermem_jax.studies import protocols


def get_config(arg=None):
    return protocols.paper_study(
        "rescued", arg=arg,
        benchmarks=("minif2f", "swebench", "spider", "dafnybench", "satlib"),
        methods=("countermem", "reasoningbank"), n_paired=120)
