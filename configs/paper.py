r"""The paper's settings (Appendix D.1): one benchmark, one agent, one backbone per run.

    python -m countermem_jax.data fetch spider       # once per benchmark; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/paper.py:spider,react,gptoss --workdir=runs/spider_react_gptoss
    python -m countermem_jax.train_selector --config=configs/paper.py:spider,react,gptoss --workdir=runs/spider_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/paper.py:spider,react,gptoss --workdir=runs/spider_react_gptoss

The argument is ``benchmark,agent,backbone[,variant]``:
  benchmark  the twelve of Appendix D.1: minif2f, proofnet, amber (Math; Lean 4 + Mathlib),
             swebench, bugsinpy (Coding), dafnybench, vericoding_dafny, vericoding_verus
             (Formal), spider, bird (Text-to-SQL), smtlib (SMT), satlib (SAT); and three more:
             quixbugs, sat_encoding, smt_encoding. Data: ``python -m countermem_jax.data fetch
             NAME`` with NAME one of minif2f, proofnet, amber, swebench, bugsinpy, dafnybench,
             vericoding, spider, bird, smtlib, satlib, quixbugs.
  agent      react | reflexion.
  backbone   gptoss: gpt-oss-120b served by vLLM (``launch/serve_vllm.sh`` writes
             vllm_urls.txt); api: a hosted OpenAI-compatible model (default Gemini 3.1
             Flash-Lite, the paper's second backbone; the key is read from the variable named
             by backbone.api_key_env, GEMINI_API_KEY, never from a file); cpu: the quickstart
             schedule with the CPU model (Spider only; configs/spider_react_cpu.py).
  variant    dbsplit: construction and evaluation databases separated (Appendix D.2).

Every hyperparameter of the paper is a field with the paper's value (docs/configs.md has the
table); change one with an override, on every phase of a workdir alike:

    python -m countermem_jax.build_memory --config=configs/paper.py:satlib,reflexion,api \
        --workdir=runs/satlib_lr --config.selector.dqn.learning_rate=3e-4
    python -m countermem_jax.evaluate --config=configs/paper.py:spider,react,gptoss \
        --workdir=runs/spider_expel --config.method=expel         # a Table 1 baseline row
    python -m countermem_jax.build_memory --config=configs/paper.py:spider,react,gptoss,dbsplit \
        --workdir=runs/spider_dbsplit
    python -m countermem_jax.build_memory --config=configs/paper.py:bird,react,api \
        --workdir=runs/bird_openai --config.backbone.base_urls=https://api.openai.com/v1 \
        --config.backbone.model=MODEL --config.backbone.api_key_env=OPENAI_API_KEY

The whole grid (12 benchmarks x 2 agents x 2 backbones x every method x 5 seeds) is one sweep:

    python -m countermem_jax.sweep --sweep=configs/sweeps/paper_grid.py --dry_run

Paper schedule (B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4; Appendix B.4, C.2).
`evaluate` prints ReAct vs ReAct+CounterMem with scores, tokens, calls and failures per solved
task, coverage, harmful use and rescued/broken counts, each with its 95% interval.
"""
import pathlib

import ml_collections

from countermem_jax.protocol import config_files
from countermem_jax.protocol.config_files import SettingError

_HERE = pathlib.Path(__file__).parent
default = config_files.load_module(_HERE / "default.py")

# What launch/serve_vllm.sh serves on the paper's host, 8 H100s (--tp 2 --replicas 4,
# --max-seqs 256 by default): each replica batches up to max-num-seqs sequences, so the servers
# hold replicas x max-num-seqs requests at once. These numbers are the configs' cap only: the URL
# file the script writes says what its replicas hold ("<url> max_num_seqs=<M>" per line) and the
# client keeps no more than that in flight (backbones/served_urls.py). A larger host needs a
# larger cap (--config.backbone.max_concurrency / --config.eval.concurrency; docs/gpu_host.md).
VLLM_REPLICAS = 4
VLLM_MAX_NUM_SEQS = 256
VLLM_SEQUENCES = VLLM_REPLICAS * VLLM_MAX_NUM_SEQS
# Selector training episodes per wave: the five seeds of Table 4 trained together hold
# VLLM_SEQUENCES requests, one per episode.
SELECTOR_WAVE = VLLM_SEQUENCES // 5

# Headroom calibration (`python -m countermem_jax.data calibrate`, docs/data.md "Headroom"):
# budgets under which the default action fails on about half of the tasks, as the paper's SAT
# base agent does. The loaders' own defaults (all families, 200,000 conflicts; 10 s and no work
# cap) remain as the smoke-test setting.
SAT_CALIBRATED = dict(sat_families=("uf50-218", "uuf50-218", "flat30-60"), max_conflicts=45)
SMT_CALIBRATED = dict(smt_max_rlimit=2_000)

# Per paper setting (App. D.1): split sizes (construction, selector training, validation,
# evaluation) within what each release holds, and the data fields that make the task a real
# decision. SATLIB's and SMT-LIB's calibrated sets are smaller (110 and 36 tasks in the shared
# copy).
SETTINGS = {
    "minif2f": (dict(n_build=80, n_train=80, n_validation=10, n_eval=60), dict(lean_split="test")),
    "proofnet": (dict(n_build=60, n_train=60, n_validation=10, n_eval=50), dict(lean_split="test")),
    "amber": (dict(n_build=40, n_train=40, n_validation=10, n_eval=40), {}),
    "swebench": (dict(n_build=100, n_train=200, n_validation=20, n_eval=100), {}),
    "bugsinpy": (dict(n_build=100, n_train=200, n_validation=20, n_eval=100), {}),
    "dafnybench": (dict(n_build=100, n_train=200, n_validation=20, n_eval=100), {}),
    "vericoding_dafny": (dict(n_build=100, n_train=200, n_validation=20, n_eval=100), {}),
    "vericoding_verus": (dict(n_build=100, n_train=200, n_validation=20, n_eval=100), {}),
    "spider": (dict(n_build=60, n_train=200, n_validation=20, n_eval=40), {}),
    "bird": (dict(n_build=60, n_train=200, n_validation=20, n_eval=40),
             dict(check_timeout_s=30.0)),
    "smtlib": (dict(n_build=10, n_train=12, n_validation=4, n_eval=10), SMT_CALIBRATED),
    "satlib": (dict(n_build=30, n_train=40, n_validation=10, n_eval=30), SAT_CALIBRATED),
}
# Registered benchmarks beyond the paper's twelve (domains' ``extra`` entries).
EXTRA_SETTINGS = {
    "quixbugs": (dict(n_build=10, n_train=8, n_validation=2, n_eval=10), {}),
    "sat_encoding": (dict(n_build=40, n_train=40, n_validation=10, n_eval=30),
                     dict(generated_per_family=25)),
    "smt_encoding": (dict(n_build=30, n_train=30, n_validation=5, n_eval=20),
                     dict(generated_per_family=40)),
}
# The fourth field of the argument. dbsplit: App. D.2's database-separated configuration,
# construction and evaluation tasks from disjoint databases (splits.n_build_envs / n_eval_envs).
VARIANTS = {"dbsplit": dict(separate_environments=True)}
AGENTS, BACKBONES = ("react", "reflexion"), ("gptoss", "api", "cpu")


def gptoss(benchmark: str, agent: str = "react"):
    """gpt-oss-120b served by vLLM (``launch/serve_vllm.sh`` writes ``vllm_urls.txt``), every
    paper value, as many requests in flight as the replicas hold (``VLLM_SEQUENCES`` at most)."""
    c = default.get_config()
    c.data.benchmark = benchmark
    # sampled as the gpt-oss model card recommends (temperature 1.0, top_p 1.0), with a seed
    # per request from the task (agents.request_seed); greedy reasoning can loop to the token
    # budget (docs/backbones.md, "Sampling")
    c.agent.update(kind=agent, max_tokens=4096, token_budget=60_000, temperature=1.0)
    c.backbone.update(kind="openai", base_urls="vllm_urls.txt", model="openai/gpt-oss-120b",
                      reasoning_effort="medium", max_concurrency=VLLM_SEQUENCES, cache_dir="auto")
    c.eval.concurrency = VLLM_SEQUENCES
    # every phase keeps the servers full (docs/concurrency.md): construction as many tasks as
    # the URL file's replicas hold (the store is the same at any W); selector waves change the
    # selector (a wave acts with its start's parameters), so theirs is fixed on every host
    c.construction.wave_size = 0
    c.selector.wave_size = SELECTOR_WAVE
    return c


def api(benchmark: str, agent: str = "react"):
    """The second backbone family (§4.1: an API model, Gemini 3.1 Flash-Lite): any
    OpenAI-compatible hosted endpoint, its key read at start-up from the environment variable
    named in ``backbone.api_key_env``, never from a file."""
    c = gptoss(benchmark, agent)
    c.backbone.update(base_urls="https://generativelanguage.googleapis.com/v1beta/openai",
                      model="gemini-3.1-flash-lite", api_key_env="GEMINI_API_KEY",
                      reasoning_effort="", max_concurrency=8)
    c.eval.concurrency = 8
    c.selector.wave_size = 1   # 8 requests in flight hold no wave
    return c


def get_config(arg="spider,react,gptoss"):
    fields = [f.strip() for f in (arg or "").split(",")]
    choices = (sorted({**SETTINGS, **EXTRA_SETTINGS}), AGENTS, BACKBONES, sorted(VARIANTS))
    if not 3 <= len(fields) <= 4:
        raise SettingError(f"configs/paper.py:{arg}: give benchmark,agent,backbone[,variant], "
                           "e.g. configs/paper.py:spider,react,gptoss")
    for name, value, allowed in zip(("benchmark", "agent", "backbone", "variant"), fields,
                                    choices):
        if value not in allowed:
            raise SettingError(f"configs/paper.py:{arg}: unknown {name} {value!r}; expected one "
                               f"of: {', '.join(allowed)}")
    benchmark, agent, backbone = fields[:3]
    if backbone == "cpu":
        if benchmark != "spider":
            raise SettingError(f"configs/paper.py:{arg}: the cpu backbone runs Spider only")
        c = config_files.load_module(_HERE / "spider_react_cpu.py").get_config(agent)
    else:
        c = {"gptoss": gptoss, "api": api}[backbone](benchmark, agent)
        splits, data = {**SETTINGS, **EXTRA_SETTINGS}[benchmark]
        c.splits.update(splits)
        c.data.update(data)
    if len(fields) == 4:
        c.splits.update(VARIANTS[fields[3]])
    return c


def study_base(arg=None):
    """The run config a study config's argument names (``configs/studies/*.py:ARG``): none or
    "gptoss" Spider, ReAct, gpt-oss-120b; "cpu[,agent]" the CPU schedule; otherwise this file's
    argument, agent and backbone defaulting to react and gptoss."""
    if arg in (None, "", "gptoss"):
        return get_config("spider,react,gptoss")
    parts = arg.split(",")
    if parts[0] == "cpu":
        cpu = config_files.load_module(_HERE / "spider_react_cpu.py")
        return cpu.get_config(parts[1] if len(parts) > 1 else "react")
    return get_config(",".join((parts + ["react", "gptoss"])[:max(3, len(parts))]))


def settings():
    """The paper settings as a study config's ``settings`` field: {benchmark: {splits, data}},
    what a study cell moved to another benchmark takes (``studies.cells.setting_config``)."""
    return ml_collections.ConfigDict(
        {name: {"splits": sizes, "data": data} for name, (sizes, data) in SETTINGS.items()})
