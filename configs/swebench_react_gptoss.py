r"""ReAct ± CounterMem on SWE-bench Verified (decision unit: edit / patch), gpt-oss-120b served by vLLM.

    python -m countermem_jax.data fetch swebench          # once; prints what to set
    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/swebench_react_gptoss.py --workdir=runs/swebench_react_gptoss
    python -m countermem_jax.train_selector --config=configs/swebench_react_gptoss.py --workdir=runs/swebench_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/swebench_react_gptoss.py --workdir=runs/swebench_react_gptoss

Needs one prepared checkout per instance: --config.data.swebench_checkouts=DIR.

Paper settings (Appendix B.4, C.2): B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4
(seed 0 online, 1-4 retrained offline from its logged transitions). The evaluation prints
the table of ReAct vs ReAct+CounterMem: score (0-100), solved / tasks, task-run tokens,
world-model calls, calls and failed attempts per solved task, retrieval coverage, selected record
uses, harmful use rate, and paired rescued / broken counts; metrics go to the workdir's
metrics.json. Not run here (no GPU / API in this project's CI), so no numbers yet.
"""
from countermem_jax.config_defaults import setting_config


def get_config():
    return setting_config("swebench", "react", "gptoss")
