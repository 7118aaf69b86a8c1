r"""Every config field with the paper's value (Appendices B.4, C.2, D.2); each config file of
``configs/`` starts from this one and overrides what differs.

    python -m countermem_jax.build_memory --config=configs/default.py --workdir=runs/default \
        --config.data.data_dir=...

Sections: ``data`` (benchmark and where its files are), ``splits`` (sizes, App. D.2), ``agent``
(ReAct / Reflexion budgets), ``backbone`` (which model, how it is reached), ``memory`` (the store,
retrieval and record use: §3.3-3.4, App. B), ``construction`` (Modules I-II, §3.1-3.2),
``selector`` (the DQN of §3.5, App. C), ``eval``, ``method`` (the Table 1 row) and ``baselines``.
The binaries lock the config, so this file is also the list of fields an override may name; the
dataclasses that read a section take its values without defaults
(``phases/context.py:method_config``).
"""
import ml_collections


def baselines() -> ml_collections.ConfigDict:
    """The baseline rows (``countermem_jax.baselines``, App. D.5): the paper fixes only
    Best-of-N's N; the rest follow each original where it states a value, ours otherwise."""
    return ml_collections.ConfigDict(dict(
        # N = 1 + K candidates, K = 4 (App. D.5); extra candidates sampled at this temperature
        # (ours: at temperature 0 all candidates would be equal)
        best_of_n=dict(k=4, temperature=0.7),
        # ExpeL (Zhao et al. 2024): ADD starts an insight at importance 2, AGREE/EDIT +1, REMOVE
        # -1, one at 0 is dropped; cap, success batch and few-shot trajectories are ours
        expel=dict(max_insights=20, success_batch=4, fewshot_k=2),
        # Generative Agents (Park et al. 2023): reflect when summed importance passes 150 over
        # the last 100 memories; recency decays 0.995 per step; recency, importance and
        # relevance min-max normalised, weights 1; top 3 (ours)
        generative_agents=dict(reflection_threshold=150, reflection_window=100,
                               recency_decay=0.995, weights=(1.0, 1.0, 1.0), top_k=3),
        # Voyager (Wang et al. 2023): top-5 skills by description similarity
        voyager=dict(top_k=5),
        # MemGPT (Packer et al. 2023): core blocks of 1,200 characters (MemGPT: 2,000; smaller
        # so both blocks and a page of results fit the 4,000-character memory field), archival
        # pages of 5 passages, up to 3 function steps per memory event (ours)
        memgpt=dict(block_chars=1200, page_size=5, max_steps=3, context_chars=4000),
        # ReasoningBank (Ouyang et al.): top-1 retrieval; MaTTS parallel scaling with k = 3
        # rollouts per task at temperature 0.7 (ours, within the paper's range of k)
        reasoningbank=dict(top_k=1, matts_k=3, matts_temperature=0.7),
    ))


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.data = ml_collections.ConfigDict(dict(
        benchmark="spider", split="dev", db_ids=(), data_dir="", bird_json="", bird_db_root="",
        check_timeout_s=10.0, generated_per_family=10, swebench_json="", swebench_checkouts="",
        lean_split="test", lean_project="", dafny_legacy=False))
    # fields of the registered benchmarks (loaders in countermem_jax/domains/<family>.py)
    c.data.update(dict(bugsinpy_root="", bugsinpy_checkouts="", vericoding_sources=(),
                       sat_families=(), max_conflicts=200_000, smt_logics=(),
                       smt_max_timeout_ms=10_000, smt_max_rlimit=0))
    # App. D.2: 60 construction and 40 evaluation tasks; the selector-training and validation
    # sizes are ours (the paper counts training in decisions, not tasks)
    c.splits = ml_collections.ConfigDict(dict(
        n_build=60, n_train=200, n_validation=20, n_eval=40, separate_environments=False,
        # D.2's database-separated configuration: 35 construction and 34 evaluation databases
        # (needs Spider train + dev; smaller pools must lower these explicitly)
        n_build_envs=35, n_eval_envs=34,
        # tasks sharing a normalized reference (paraphrase twins) stay inside one split
        group_by_reference=True, manifest="",
        # split seed and disjoint evaluation folds (protocol/splits.py): 0, 0 is D.2's one draw
        seed=0, folds=0,
        # leave the report-pool questions read before the pools were fixed (and their
        # reference groups) out of evaluation (protocol/pools.py)
        hold_out_seen=False))
    c.agent = ml_collections.ConfigDict(dict(
        kind="react", max_attempts=3, token_budget=20_000, temperature=0.0, max_tokens=384, seed=0))
    c.backbone = ml_collections.ConfigDict(dict(
        kind="llama_cpp", model_path="", n_ctx=4096, n_threads=0, base_urls="", model="",
        max_concurrency=64, timeout_s=600.0, max_attempts=6, reasoning_effort="", cache_dir=""))
    c.backbone.api_key_env = ""   # hosted APIs: the environment variable holding the key
    c.backbone.cpu_model = ""     # llama_cpp without model_path: a pinned CPU model (gguf.MODELS)
    # Structured replies: output constraints sent to the server; a reply cut off at its token
    # limit is asked once more with this budget (0: twice the call's own) ...
    c.backbone.constraints = True
    c.backbone.max_tokens_on_truncation = 0
    # ... and this repetition penalty (1: none, the paper's decoding; docs/structured_replies.md)
    c.backbone.repetition_penalty_on_truncation = 1.0

    m = c.memory = ml_collections.ConfigDict()
    m.capacity = 200                # B, records kept (App. B.4; B.3 counts records)
    m.retention = "utility"         # eviction rule: S_keep of Eq. 5 (memory/retention.py RULES)
    m.seed = 0                      # drives only the "random" retention rule (an ablation)
    m.top_k = 3                     # k, records retrieved per decision (Eq. 8, App. B.4)
    m.reuse_weight = 0.2            # λ_reuse, the reuse term of the retrieval score (Eq. 8)
    m.use_conditions = True         # the applicability condition c filters retrieval (§3.4)
    m.render_condition = True       # ... and is shown to the agent with the record (§3.4)
    # an undecided condition (no checker decides, the judge states no YES/NO) keeps the record
    # out: applicability that cannot be established is not assumed
    m.unknown_condition = "exclude"
    # the condition judge's own sampling (§3.4): room for a reasoning model to answer
    m.judge = ml_collections.ConfigDict(dict(max_tokens=1024, reasoning_effort="low",
                                             temperature=0.0))
    # a record without a condition of its own: "derive" = the condition derived from its
    # verified edit (docs/protocol.md), "exclude" = kept out of retrieval (docs/ledger.md, Q3)
    m.fallback_condition = "exclude"
    # how a selected record revises the draft (§3.4): "llm" = the LLM rewrites the draft with
    # the record (the paper); "replay" = the record's checked edit is made on the draft where
    # it fits (method/edit_replay.py)
    m.revision = "llm"
    m.admission = ml_collections.ConfigDict()   # S_adm (Eq. 4, App. B.1); ε_adm: construction
    m.admission.w_delta = 1.0       # λ_Δ, weight of the checked gain Δ̃ (App. B.4)
    m.admission.w_reuse = 0.5       # λ_u, weight of the reuse utility ũ
    m.admission.w_repeat = 0.7      # λ_r, penalty on repeated advice R
    m.admission.w_conflict = 1.0    # λ_I, penalty on conflicting advice I
    m.admission.threshold = 0.1     # τ_adm, which S_adm must strictly exceed
    m.retention_weights = ml_collections.ConfigDict()   # S_keep (Eq. 5, App. B.3)
    m.retention_weights.alpha = 1.0  # α, weight of the checked gain Δ̃ (App. B.4)
    m.retention_weights.beta = 1.0   # β, weight of the reuse utility ũ
    m.retention_weights.omega = 0.5  # ω, weight of the use frequency F
    m.retention_weights.eta = 0.7    # η, penalty on redundancy R
    m.reuse_rho = 0.3               # ρ, step of the reuse-utility update (Eq. 6, App. B.4)
    # App. D.2's low-utility suppression gate, construction only: a record whose reuse utility
    # fell below suppress_below after suppress_after_uses uses is no longer offered (0 uses:
    # off); net-harmful reuse (u < 0, Eq. 6) over three uses is our reading of "low utility"
    m.suppress_below = 0.0
    m.suppress_after_uses = 3

    k = c.construction = ml_collections.ConfigDict()
    k.k = 4                         # K, alternatives proposed per failed action (§3.1, App. B.4)
    k.max_expanded_failures = 2     # failed decisions expanded per task (App. B.4)
    # counterfactual checks per task (ours: the paper keeps the allowance apart from the solving
    # budget but gives no number)
    k.verification_budget = 8
    k.epsilon = 0.05                # ε_adm, the raw-gain floor Δ > ε_adm (App. B.1)
    # the fixed selector that reuses records during construction and its threshold under
    # "relevance_threshold" (selector/policies.py)
    k.reuse_policy = "always_top1"
    k.relevance_threshold = 0.5
    # free-text conditions scoped to the source database (for backbones too weak to judge one)
    k.scope_free_text_conditions = False
    # 0: no transfer checks (the paper); N: each record's edit is checked on up to N other
    # construction tasks' failed actions of its database (method/transfer_checks.py)
    k.transfer_checks = 0
    # §6.1's component ablation: "verified" = the method; "unverified_advice" = CF without WM;
    # "within_task" = WM without CF (counterfactual.py)
    k.corrections = "verified"

    # the DQN schedule (App. C.2, Table 3): a checkpoint every checkpoint_every decisions is
    # scored on the validation split and the best one is evaluated
    s = c.selector = ml_collections.ConfigDict()
    s.total_decisions = 2000        # training decisions (Table 3)
    s.learning_starts = 100         # decisions before the first update (Table 3)
    s.train_every = 4               # one update every 4 decisions (Table 3)
    s.target_sync_every = 250       # θ⁻ <- θ every 250 decisions (Table 3)
    s.checkpoint_every = 250        # validation cadence (App. C.2)
    s.batch_size = 32               # replay batch (Table 3)
    s.seeds = (0, 1, 2, 3, 4)       # DQN seeds (App. C.2, Table 4)
    # training episodes run concurrently with the parameters of the wave's start
    # (docs/concurrency.md); 1 = the sequential online learner
    s.wave_size = 1
    s.dqn = ml_collections.ConfigDict()
    s.dqn.hidden = (64, 64)         # Q-network hidden widths (App. C.1, 98 -> 64 -> 64 -> 5)
    s.dqn.learning_rate = 1e-3      # Adam step size (Table 3)
    s.dqn.adam_eps = 1e-8           # Adam ε (Table 3)
    s.dqn.gamma = 0.95              # discount γ (Table 3)
    s.dqn.replay_capacity = 10_000  # replay buffer size (Table 3)
    s.dqn.epsilon_start = 0.30      # ε-greedy at the first decision (Table 3) ...
    s.dqn.epsilon_end = 0.05        # ... decaying linearly to this (Table 3) ...
    s.dqn.exploration_fraction = 1.0  # ... over this fraction of total_decisions
    # the reward of Eq. 10: r = 1[t=T]·1[solved] − λ_w·Δcalls − λ_f·Δfailures − λ_τ·Δtokens/τ_0
    s.reward = ml_collections.ConfigDict()
    s.reward.call_penalty = 0.15    # λ_w (Table 3)
    s.reward.failure_penalty = 0.25  # λ_f (Table 3)
    s.reward.token_penalty = 0.02   # λ_τ (Table 3)
    s.reward.token_scale = 1e4      # τ_0, tokens (Table 3)
    # eval.seeds: the DQN seeds evaluated, one run each (() = every seed in selector.seeds);
    # eval.concurrency: evaluation tasks in flight (docs/concurrency.md)
    c.eval = ml_collections.ConfigDict(dict(
        selector="dqn", seeds=(), relevance_threshold=0.5, concurrency=1))
    # construction tasks in flight (docs/concurrency.md; the store is the same for every value);
    # 0: as many as the servers hold, resolved at phase start (phases/wave_sizes.py)
    c.construction.wave_size = 1
    # evaluation-only interventions on the same store and selector (studies, App. D.5/E.3):
    # which records reach the selector (retrieval.retrieve.INTERVENTIONS, seeded), and removing
    # the applicability condition c at both sites (retrieval filter and rendering)
    c.eval.update(dict(retrieval_intervention="matched", intervention_seed=0,
                       remove_conditions=False))
    c.method = "countermem"   # none | countermem | best_of_n | expel | ... (countermem_jax.baselines)
    c.baselines = baselines()
    return c
