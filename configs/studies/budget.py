r"""Study 8, comparison at a common task-run token budget (paper Appendix E.2, Figure 7):
ReasoningBank, ReasoningBank + MaTTS, ReasoningBank + verified feedback and CounterMem (ReAct,
gpt-oss-120b) in five domains (Math: miniF2F, Coding: SWE-bench Verified, Text-to-SQL: Spider,
Formal: DafnyBench, SAT: SATLIB) under one budget of 6M task-run tokens per method, split
equally over the five benchmarks (1.2M each) and within each into 50% construction (the longest
prefix of the construction split that fits) and 50% solving (held-out tasks past the budget
count as unsolved). The paper does not state its allocation; this is ours, set by
protocol.construction_fraction and printed in study.json's notes.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.study --config=configs/studies/budget.py --workdir=runs/study_budget
    python -m countermem_jax.report runs/study_budget --out runs/report_budget

--config.protocol.benchmarks='("spider","satlib")' --config.protocol.token_budget=2400000 keeps
the per-benchmark share at 1.2M on the domains this machine can check.

Smallest command that runs here (CPU model; Spider only; 5 construction tasks, 4 once the held-out
tasks' paraphrase twins are removed; 2 selector-training tasks, 1 validation task, a 4-decision
selector; 4 held-out tasks; 6,000 task-run tokens per method, 3,000 for construction and 3,000 for
solving):

    python -m countermem_jax.study --config=configs/studies/budget.py:cpu \
        --config.base.splits.n_build=5 --config.base.splits.n_train=2 \
        --config.base.splits.n_validation=1 --config.base.splits.n_eval=4 \
        --config.base.selector.total_decisions=4 --config.base.selector.learning_starts=2 \
        --config.base.selector.checkpoint_every=4 \
        --config.protocol.benchmarks='("spider",)' --config.protocol.token_budget=6000 \
        --workdir=/tmp/study_budget
    python -m countermem_jax.report /tmp/study_budget --out /tmp/report_budget
"""
import pathlib

from countermem_jax.protocol import config_files
from countermem_jax.studies import protocols

PAPER = config_files.load_module(pathlib.Path(__file__).parents[1] / "paper.py")


def get_config(arg=None):
    return protocols.paper_study(
        "budget", PAPER.study_base("cpu" if arg == "cpu" else None), PAPER.settings(),
        benchmarks=("minif2f", "swebench", "spider", "dafnybench", "satlib"),
        methods=("reasoningbank", "reasoningbank_matts", "reasoningbank_verified", "countermem"),
        token_budget=6_000_000, construction_fraction=0.5)
