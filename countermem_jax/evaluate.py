"""Phase 3: evaluates the base agent with and without CounterMem on held-out tasks.

    python -m countermem_jax.evaluate --config=configs/spider_react_cpu.py --workdir=/tmp/cm
"""
from countermem_jax import cli, experiment

if __name__ == "__main__":
    cli.run_phase(experiment.evaluate)
