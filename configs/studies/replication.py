r"""The replication over split seeds on the report pool (issue 36; beyond the paper).

    python -m countermem_jax.study --config=configs/studies/replication.py:cpu --workdir=runs/replication
    python -m countermem_jax.study --config=configs/studies/replication.py:cpu,small --workdir=/tmp/replication_small

The first is the replication: the frozen CPU config (``configs/spider_react_cpu.py``,
Qwen2.5-Coder-0.5B, ReAct) on the report pool's databases (``protocol/pools.py``, fixed
2026-11-27: cre_Doc_Template_Mgt, network_1, real_estate_properties,
student_transcripts_tracking; 222 questions in 113 reference groups) with the paper's split
sizes (60 construction drawn, 16 training, 3 validation, 40 evaluation tasks), on R = 3 split
seeds. Split seed r evaluates fold r of 3 disjoint folds of whole reference groups, so the three
seeds evaluate 120 distinct tasks. The 21 report-pool questions that probes read before the
pools were fixed are never evaluated, nor are their reference groups (``splits.hold_out_seen``),
which leaves 183 questions in 93 groups to cut the folds from; construction, drawn as in
Appendix D.2 from all 222 and stripped of evaluation's groups, keeps 52, 49 and 50 tasks. Per seed it builds,
trains and evaluates ReAct and ReAct+CounterMem with the DQN and with always-top-1 (one build,
one base run), and on seed 0 the two ablations of ``components.py``: counterfactuals without
the world model (``construction.corrections=unverified_advice``) and the world model without
counterfactuals (``construction.corrections=within_task``: at evaluation, test-time checks
against the reference, an oracle search rather than a memory). It is the only reader of the
report pool: the config is frozen before it runs, nothing tunes on its outcome, and every phase
refuses a report-pool database under any other config (``phases/report_pool.py``).

It differs from the paper (``configs/spider_react_cpu.py``): 2 attempts per task (paper 3),
the DQN trained on 30 decisions with 1 seed (paper 2,000 and 5), the chosen record's edit
replayed on the draft instead of the LLM's revision (``memory.revision=replay``), and records
kept out unless their edit verifies on up to 8 other construction tasks (transfer checks).

It prints each seed's variant table as the seed finishes, then one table pooled over seeds: per
arm (ReAct, CounterMem with the DQN, with always-top-1, the ablations on seed 0) the seeds, tasks
(reference groups), score [95% CI] (a bootstrap over reference groups, a group under two seeds
one unit), the paired difference to ReAct [95% CI] (Tango's score interval with a design effect
for the groups), the sign test's p on the tasks rescued vs broken (one count per task),
rescued/broken, harmful (worse than ReAct's run at the same decision) / selected record uses,
uses that changed the draft, and those whose changed action was right; each arm's funnel from
decisions to harmful uses; then the same per seed, whether issue 36's goal is met (≥ +3 pp,
CI above 0, ≥ 120 tasks, rescued ≥ 2× broken, ≥ 50 % of uses changing the draft), and the
provenance (config, code version, split hash, store hash and selector checkpoint fingerprint per
seed, wall time). ``DIR/study.json`` holds it all; ``python -m countermem_jax.report DIR --out R``
reads it. A killed run resumes where it stopped (run the same command again).

Expected wall time on 2 cores (estimated from issue 36's runs with the 0.5B, not measured here):
per seed construction of about 46 tasks ~15 min, the selector's 30 decisions and validations
~5 min, and evaluation of 40 tasks for ReAct and one CounterMem arm ~15 min, the second arm
~8 min more (the base run is shared): ~45 min per seed, ~2.3 h for the main arms over three
seeds (the issue's goal: ≤ 3 h); the seed-0 ablations add two builds, a selector and two memory
runs, ~45 min. Run it alone on the machine (``--config.base.backbone.n_threads`` as for the
quickstart).

The second command is a smoke run of the same protocol at tiny sizes on the quickstart's
databases (tuning pool; it reads nothing of the report pool): 3 seeds of 4 construction, 2
training, 1 validation and 4 evaluation tasks, 4 selector decisions.
``tests/test_replication.py`` runs it with the scripted backbone. ``--config.protocol.split_seeds``
sets R (``--config.base.splits.folds`` must then be ≥ R, or 0 for independent draws per seed).
"""
import pathlib

from countermem_jax.protocol import config_files, pools
from countermem_jax.studies import protocols

HERE = pathlib.Path(__file__).parent
PAPER = config_files.load_module(HERE.parent / "paper.py")

# The paper's split sizes (Appendix D.2; training and validation as the CPU schedule has them).
SIZES = dict(n_build=60, n_train=16, n_validation=3, n_eval=40)
SMALL_SIZES = dict(n_build=4, n_train=2, n_validation=1, n_eval=4)
SMALL_SELECTOR = dict(total_decisions=4, learning_starts=1, train_every=1, target_sync_every=2,
                      checkpoint_every=2, batch_size=2)
SPLIT_SEEDS = 3
ARMS = {"countermem_dqn": ("ReAct+CounterMem (DQN)", {"eval": {"selector": "dqn"}}),
        "countermem_top1": ("ReAct+CounterMem (top-1)", {"eval": {"selector": "always_top1"}})}
ABLATION_SEEDS = (0,)


def _components_variants() -> dict:
    """The two ablations exactly as ``components.py`` declares them."""
    module = config_files.load_module(HERE / "components.py")
    return {k: module.VARIANTS[k] for k in ("cf_without_wm", "wm_without_cf")}


def get_config(arg="cpu"):
    parts = (arg or "cpu").split(",")
    base = PAPER.study_base("cpu")
    if "small" in parts:
        base.splits.update(SMALL_SIZES)
        base.selector.update(SMALL_SELECTOR)
    else:
        base.data.db_ids = pools.report_pool("spider")
        base.splits.update(SIZES)
        # the 21 report-pool questions probes read before the pools were fixed (and their
        # reference groups) are never evaluated; they may still be built or trained on
        base.splits.hold_out_seen = True
    base.splits.folds = SPLIT_SEEDS   # fold r of the reference groups: split seed r's evaluation
    c = protocols.study_config(
        "replication", base, split_seeds=SPLIT_SEEDS, ablation_seeds=ABLATION_SEEDS,
        arms={k: {"label": label, "overrides": o} for k, (label, o) in ARMS.items()},
        ablations={k: {"label": label, "overrides": o}
                   for k, (label, o) in _components_variants().items()})
    c.config_file = f"configs/studies/replication.py:{arg}"
    return c
