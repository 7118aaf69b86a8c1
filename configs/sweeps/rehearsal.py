"""The GPU-host rehearsal's sweep (launch/rehearse_gpu_host.sh): Spider, ReAct, the served cell
(gptoss: the URL file of the host's replicas) and the hosted-style cell (api: a loopback stand-in
for a hosted API), CounterMem, seed 0, at the sizes of configs/rehearsal/spider.py.

    python -m countermem_jax.sweep --sweep=configs/sweeps/rehearsal.py --dry_run
    python -m countermem_jax.sweep --sweep=configs/sweeps/rehearsal.py --local \
        --sweep.root=runs/rehearsal/sweep

The script gives the root and, for its --small variant,
--sweep.run_config='configs/rehearsal/spider.py:{backbone},small'.
"""
from countermem_jax.sweep.spec import default_sweep


def get_config():
    c = default_sweep()
    c.root = "runs/rehearsal/sweep"
    c.run_config = "configs/rehearsal/spider.py:{backbone}"
    c.benchmarks = ("spider",)
    c.agents = ("react",)
    c.backbones = ("gptoss", "api")
    c.methods = ("countermem",)
    c.seeds = (0,)
    c.progress_every_s = 30.0
    return c
