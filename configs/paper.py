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
from countermem_jax.protocol.config_defaults import paper_config


def get_config(arg="spider,react,gptoss"):
    return paper_config(arg)
