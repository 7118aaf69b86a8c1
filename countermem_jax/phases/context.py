"""What every phase sets up before its first task (paper Appendix C.3, D.2).

``setup`` loads the benchmark through the domain registry, draws (or reads) the disjoint task
splits and refuses a workdir built with different ones, then makes the backbone with its token
ledger; the builders turn the config into the method's parts (condition checker, retrieval
index, DQN schedule, store and construction settings) so the phases share one reading of it.

The order in ``setup`` is the order of the checks: data and splits are read and checked before
any backbone exists, so a missing dataset, a split too small for the config or a workdir drawn
with other splits is reported in one line without loading a model.
"""
import dataclasses
import json
import pathlib

import ml_collections

from countermem_jax import config_validation, domains
from countermem_jax import splits as splits_lib
from countermem_jax.agents import AgentConfig
from countermem_jax.backbones.base import TokenLedger
from countermem_jax.backbones.factory import make_backbone
from countermem_jax.checker_pool import CheckerPool
from countermem_jax.counterfactual import ConstructionConfig
from countermem_jax.memory import scoring
from countermem_jax.memory.reuse import suppressed
from countermem_jax.memory.store import StoreConfig
from countermem_jax.phases.workdir import PhaseError, Workdir
from countermem_jax.prompting.failures import ParseFailureLog
from countermem_jax.retrieval.conditions import (CompositeChecker, JudgeSettings, LLMJudgeChecker,
                                                 RuleChecker)
from countermem_jax.retrieval.retrieve import RetrievalIndex
from countermem_jax.selector import dqn

__all__ = ["PhaseContext", "PhaseError", "setup", "draw_splits", "condition_checker",
           "retrieval_index", "dqn_config", "store_config", "construction_config"]


@dataclasses.dataclass
class PhaseContext:
    """The loaded benchmark, its splits and the backbone one phase runs with; every agent of the
    phase logs reply-contract violations in ``parse_failures`` (Appendix D.8)."""
    splits: splits_lib.Splits
    evaluator: object
    domain: object
    backbone: object
    ledger: TokenLedger
    agent_cfg: AgentConfig
    parse_failures: ParseFailureLog
    # one bounded pool for the checker calls of every agent of the phase (sized for the machine)
    checks: CheckerPool = dataclasses.field(default_factory=CheckerPool)


def draw_splits(cfg, tasks) -> splits_lib.Splits:
    """The build / train / validation / eval splits: from a manifest file when the config names
    one, else drawn with the paper's grouping (reference-answer twins stay together)."""
    # Tasks sharing a reference answer stay in one split: an evaluation task must not retrieve
    # its twin's verified record, whose corrected action is its own reference answer.
    grouped = cfg.splits.get("group_by_reference", True)
    if cfg.splits.get("manifest"):
        manifest_file = pathlib.Path(cfg.splits.manifest)
        return splits_lib.from_manifest(tasks, json.loads(manifest_file.read_text()), grouped)
    sp = splits_lib.make_splits(tasks, cfg.splits.n_build, cfg.splits.n_train,
                                cfg.splits.n_validation, cfg.splits.n_eval,
                                cfg.splits.separate_environments,
                                cfg.splits.get("n_build_envs", 0),
                                cfg.splits.get("n_eval_envs", 0), grouped)
    config_validation.check_split_sizes(cfg, sp, len(tasks))  # before the backbone
    return sp


def _pin_splits(workdir: Workdir, sp: splits_lib.Splits) -> None:
    """Writes the split manifest on first use; later phases must find the same assignment."""
    manifest = sp.manifest()
    # Each phase redraws (or rereads) the splits; compared by assignment, not byte for byte,
    # since a manifest written by an older version lacks the newer informational fields.
    if workdir.splits.exists():
        previous = json.loads(workdir.splits.read_text())
        if not splits_lib.same_assignment(previous, manifest):
            raise PhaseError(f"{workdir.splits}: the task splits differ from the ones this workdir "
                             "was built with (config changed?); use a new --workdir")
    else:
        workdir.splits.write_text(json.dumps(manifest, indent=1))


def setup(cfg, workdir: Workdir, backbone=None, benchmark=None) -> PhaseContext:
    """Loads tasks, splits and the backbone; ``backbone`` / ``benchmark`` (tasks, evaluator,
    domain) may be injected, which is how the pipeline tests run on a scripted backbone."""
    tasks, evaluator, domain = benchmark or domains.load_benchmark(cfg.data)
    sp = draw_splits(cfg, tasks)
    _pin_splits(workdir, sp)
    if backbone is None:
        backbone_cfg = cfg.backbone
        if backbone_cfg.get("cache_dir") == "auto":  # a response cache inside the workdir
            backbone_cfg = ml_collections.ConfigDict(backbone_cfg.to_dict())
            backbone_cfg.cache_dir = str(workdir.cache)
        backbone = make_backbone(backbone_cfg, TokenLedger())
    return PhaseContext(sp, evaluator, domain, backbone, backbone.ledger,
                        AgentConfig(**cfg.agent.to_dict()), ParseFailureLog(workdir.parse_failures))


def condition_checker(cfg) -> CompositeChecker:
    """Rule conditions first; free-text conditions judged by the backbone with the judge's own
    sampling settings, asynchronously by the deciding decision (``memory_use``), charged to it
    (paper §3.4, Appendix C.1)."""
    return CompositeChecker([RuleChecker(cfg.memory.fallback_condition),
                             LLMJudgeChecker(JudgeSettings(**cfg.memory.judge.to_dict()))],
                            cfg.memory.unknown_condition)


def retrieval_index(cfg, records, checker, evaluation: bool = False,
                    construction: bool = False) -> RetrievalIndex:
    """Module III's index over ``records`` with the config's top-k, reuse weight (Eq. 8) and
    condition filter; at ``evaluation`` also the studies' evaluation-only interventions on the
    same store (``eval.retrieval_intervention`` and its seed, §6.2; ``eval.remove_conditions``,
    Appendix E.3). During ``construction`` the low-utility suppression gate leaves out the
    records it withholds (Appendix D.2; inactive in training and evaluation)."""
    if construction:
        records = [r for r in records if not suppressed(r, cfg.memory.suppress_below,
                                                        cfg.memory.suppress_after_uses)]
    interventions = dict(intervention=cfg.eval.retrieval_intervention,
                         intervention_seed=cfg.eval.intervention_seed) if evaluation else {}
    return RetrievalIndex(records, top_k=cfg.memory.top_k, reuse_weight=cfg.memory.reuse_weight,
                          checker=checker, use_conditions=cfg.memory.use_conditions and not (
                              evaluation and cfg.eval.remove_conditions), **interventions)


def dqn_config(cfg) -> dqn.DQNConfig:
    """The selector's DQN schedule and budgets (Appendix C.2)."""
    s = cfg.selector
    # Only the schedule and batch size come from the config; network, optimiser, exploration
    # and reward weights keep ``DQNConfig``'s defaults (the DQN table of Appendix C.2), and
    # every checkpoint records the full config it was trained with.
    return dqn.DQNConfig(total_decisions=s.total_decisions, learning_starts=s.learning_starts,
                         train_every=s.train_every, target_sync_every=s.target_sync_every,
                         checkpoint_every=s.checkpoint_every, batch_size=s.batch_size)


def store_config(cfg) -> StoreConfig:
    """Capacity B, retention rule and admission margin of the store (§3.3, §5.2)."""
    m = cfg.memory
    return StoreConfig(capacity=m.capacity, retention=m.retention, seed=m.seed,
                       admission=scoring.AdmissionConfig(epsilon=cfg.construction.epsilon))


def construction_config(cfg) -> ConstructionConfig:
    """Modules I–II settings: K proposals, failures expanded, verification budget (§3.2–3.3)."""
    c = cfg.construction
    return ConstructionConfig(
        k=c.k, max_expanded_failures=c.max_expanded_failures,
        verification_budget=c.verification_budget, epsilon=c.epsilon,
        scope_free_text_conditions=c.scope_free_text_conditions, corrections=c.corrections)
