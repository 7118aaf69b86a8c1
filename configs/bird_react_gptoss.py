r"""ReAct ± CounterMem on BIRD mini-dev (needs the BIRD dev databases: --config.data.bird_db_root=.../dev_databases), gpt-oss-120b served by vLLM.

    launch/serve_vllm.sh --tp 2 --replicas 4 --urls-file vllm_urls.txt     # on the GPU host
    python -m countermem_jax.build_memory   --config=configs/bird_react_gptoss.py --workdir=runs/bird_react_gptoss
    python -m countermem_jax.train_selector --config=configs/bird_react_gptoss.py --workdir=runs/bird_react_gptoss
    python -m countermem_jax.evaluate       --config=configs/bird_react_gptoss.py --workdir=runs/bird_react_gptoss

Paper settings (Appendix B.4, C.2): B = 200, K = 4, k = 3, 2,000 selector decisions, seeds 0-4
(seed 0 online, 1-4 retrained offline from its logged transitions). Prints ReAct vs
ReAct+CounterMem with scores, tokens, calls and failures per solved task, coverage, harmful
use and rescued/broken counts.
"""
import os

from countermem_jax.config_defaults import gptoss_config
from countermem_jax.paths import data_root

DATA = str(data_root())


def get_config():
    c = gptoss_config("bird", "react")
    # bird_db_root: the official dev_databases folder (not in the shared data); set it with
    # --config.data.bird_db_root=/path/to/dev_databases.
    c.data.update(bird_json=os.path.join(DATA, "bird_minidev/mini_dev_sqlite.json"),
                  bird_db_root="", check_timeout_s=30.0)
    c.splits.update(n_build=60, n_train=200, n_validation=20, n_eval=40)
    return c
