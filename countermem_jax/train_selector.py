"""Phase 2: trains the DQN memory-use selector over the frozen store.

    python -m countermem_jax.train_selector --config=configs/spider_react_cpu.py --workdir=/tmp/cm
"""
from countermem_jax import cli, experiment

if __name__ == "__main__":
    cli.run_phase(experiment.train_selector)
