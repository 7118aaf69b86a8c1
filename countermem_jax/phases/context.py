"""What every phase sets up before its first task (paper Appendix C.3, D.2).

``setup`` loads the benchmark through the domain registry, draws (or reads) the disjoint task
splits and refuses a workdir built with different ones, then makes the backbone with its token
ledger, and reads the method's typed sections from the config once (``MethodConfig``: store,
construction, DQN, retrieval, the use of a chosen record, condition judge); the phases take those
sections, not the config.

The order in ``setup`` is the order of the checks: data and splits are read and checked before
any backbone exists, so a missing dataset, a split too small for the config or a workdir drawn
with other splits is reported in one line without loading a model.
"""
import dataclasses
import json
import pathlib

import ml_collections

from countermem_jax.phases import config_validation, report_pool
from countermem_jax import domains
from countermem_jax.protocol import pools, splits as splits_lib
from countermem_jax.method.agents import AgentConfig
from countermem_jax.backbones.base import TokenLedger
from countermem_jax.backbones.factory import make_backbone
from countermem_jax.runtime.inflight import CheckerPool
from countermem_jax.method.counterfactual import ConstructionConfig
from countermem_jax.method import edit_replay
from countermem_jax.method.memory import scoring
from countermem_jax.method.memory.reuse import suppressed
from countermem_jax.method.memory.store import StoreConfig
from countermem_jax.method.memory.world import WorldCheck
from countermem_jax.phases.workdir import PhaseError, Workdir
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.method.conditions.checkers import (CompositeChecker, JudgeSettings, LLMJudgeChecker,
                                                 RuleChecker)
from countermem_jax.method.retrieval.retrieve import RetrievalConfig, RetrievalIndex
from countermem_jax.method.selector import dqn

__all__ = ["MethodConfig", "PhaseContext", "PhaseError", "setup", "draw_splits", "method_config",
           "condition_checker", "retrieval_index", "world_check"]


def typed(cls, section, **fields):
    """``cls`` built from the same-named fields of a config ``section``, with ``fields`` given
    explicitly: the one place a config section becomes a typed one (the typed classes have no
    defaults; every value comes from the config)."""
    names = {f.name for f in dataclasses.fields(cls)} - set(fields)
    return cls(**{k: v for k, v in section.items() if k in names}, **fields)


@dataclasses.dataclass(frozen=True)
class RecordUse:
    """How a record the selector chose reaches the draft (§3.4), the same in construction,
    selector training and evaluation: who revises the draft with it (``memory.revision``;
    under "replay" retrieval also offers only records whose edit has a place in the draft) and
    whether its condition is shown with it (``memory.render_condition``)."""
    revision: str
    render_condition: bool


@dataclasses.dataclass(frozen=True)
class MethodConfig:
    """The method's settings as typed sections, read from the config once per phase."""
    store: StoreConfig                  # B, retention rule and weights, S_adm, τ_adm, ρ (§3.3)
    construction: ConstructionConfig    # K, failures expanded, verification budget, ε_adm
    dqn: dqn.DQNConfig                  # Table 3 and the reward of Eq. 10 (Appendix C.2)
    retrieval: RetrievalConfig          # k, λ_reuse, condition handling (§3.4)
    use: RecordUse                      # how a chosen record revises the draft (§3.4)
    judge: JudgeSettings                # the condition judge's sampling
    fallback_condition: str             # memory.fallback_condition
    unknown_condition: str              # memory.unknown_condition


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
    method: MethodConfig
    # one bounded pool for the checker calls of every agent of the phase (sized for the machine)
    checks: CheckerPool = dataclasses.field(default_factory=CheckerPool)


def _held_out_of_eval(cfg) -> frozenset:
    """``splits.hold_out_seen``: the report-pool questions a probe read before the pools were
    fixed stay out of evaluation, with their reference groups (protocol/pools.py)."""
    if not cfg.splits.get("hold_out_seen", False):
        return frozenset()
    return pools.seen_before_fixing(cfg.data.benchmark)


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
                                cfg.splits.get("n_eval_envs", 0), grouped,
                                split_seed=cfg.splits.get("seed", 0),
                                folds=cfg.splits.get("folds", 0),
                                held_out_of_eval=_held_out_of_eval(cfg))
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
    method = method_config(cfg)
    tasks, evaluator, domain = benchmark or domains.load_benchmark(cfg.data)
    report_pool.check(cfg, tasks)   # the report pool: the frozen replication's config only
    sp = draw_splits(cfg, tasks)
    _pin_splits(workdir, sp)
    if backbone is None:
        backbone_cfg = cfg.backbone
        if backbone_cfg.get("cache_dir") == "auto":  # a response cache inside the workdir
            backbone_cfg = ml_collections.ConfigDict(backbone_cfg.to_dict())
            backbone_cfg.cache_dir = str(workdir.cache)
        backbone = make_backbone(backbone_cfg, TokenLedger())
    return PhaseContext(sp, evaluator, domain, backbone, backbone.ledger,
                        AgentConfig(**cfg.agent.to_dict()), ParseFailureLog(workdir.parse_failures),
                        method)


def method_config(cfg) -> MethodConfig:
    """The method's typed sections from ``cfg`` (paper §3, Appendices B.4 and C.2)."""
    m, s = cfg.memory, cfg.selector
    return MethodConfig(
        store=typed(StoreConfig, m, admission=typed(scoring.AdmissionConfig, m.admission,
                                                    epsilon=cfg.construction.epsilon),
                    retention_weights=typed(scoring.RetentionWeights, m.retention_weights)),
        construction=typed(ConstructionConfig, cfg.construction),
        dqn=typed(dqn.DQNConfig, {**s, **s.dqn, **s.reward}),
        retrieval=typed(RetrievalConfig, m, intervention=cfg.eval.retrieval_intervention,
                        intervention_seed=cfg.eval.intervention_seed,
                        remove_conditions=cfg.eval.remove_conditions),
        use=typed(RecordUse, m),
        judge=typed(JudgeSettings, m.judge), fallback_condition=m.fallback_condition,
        unknown_condition=m.unknown_condition)


def condition_checker(method: MethodConfig) -> CompositeChecker:
    """Rule conditions first; free-text conditions judged by the backbone with the judge's own
    sampling settings, asynchronously by the deciding decision (``memory_use``), charged to it
    (paper §3.4, Appendix C.1)."""
    return CompositeChecker([RuleChecker(method.fallback_condition), LLMJudgeChecker(method.judge)],
                            method.unknown_condition)


def world_check(ctx: PhaseContext) -> WorldCheck:
    """The current checker and the data of every task of the phase's splits: what retrieval
    compares each record's stamp with, refusing the stale ones (``method/memory/world.py``)."""
    sp = ctx.splits
    return WorldCheck(ctx.evaluator, (*sp.build, *sp.train, *sp.validation, *sp.eval))


def retrieval_index(method: MethodConfig, records, checker, evaluation: bool = False,
                    construction: bool = False, groups=None, world=None,
                    names=None) -> RetrievalIndex:
    """Module III's index over ``records`` with the config's top-k, reuse weight (Eq. 8) and
    condition filter; at ``evaluation`` also the studies' evaluation-only interventions on the
    same store (``eval.retrieval_intervention`` and its seed, §6.2; ``eval.remove_conditions``,
    Appendix E.3). During ``construction`` the low-utility suppression gate leaves out the
    records it withholds (Appendix D.2; inactive in training and evaluation). ``groups`` (the
    splits' task id -> reference group, ``Splits.groups``) keeps every decision from the records
    of its reference group, in every phase; ``world`` (``world_check``) keeps out the stale records;
    ``names`` (the domain's ``ActionNames``) is the replay's check that its result is well formed.
    """
    r = method.retrieval
    if construction:
        records = [rec for rec in records
                   if not suppressed(rec, r.suppress_below, r.suppress_after_uses)]
    interventions = dict(intervention=r.intervention,
                         intervention_seed=r.intervention_seed) if evaluation else {}
    # under replay a record is offered only where its edit has a place in the draft
    fits = edit_replay.place_test(names) if method.use.revision == "replay" else None
    return RetrievalIndex(records, top_k=r.top_k, reuse_weight=r.reuse_weight, checker=checker,
                          use_conditions=r.use_conditions and not (
                              evaluation and r.remove_conditions), groups=groups,
                          fits=fits, world=world, **interventions)
