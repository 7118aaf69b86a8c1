"""Phase 2: trains the DQN memory-use selector over the frozen store, one real run per seed.

    python -m countermem_jax.train_selector --config=configs/spider_react_cpu.py --workdir=/tmp/cm \
        --config.selector.seeds='(0,1)'

Each seed's best checkpoint goes to ``WORKDIR/selector/seed_<s>/`` (docs/protocol.md).
"""
from countermem_jax.runtime import jax_platform

jax_platform.choose_platform()  # before JAX is imported: CPU unless --jax_gpu, no preallocation

from countermem_jax import cli, experiment  # noqa: E402

if __name__ == "__main__":
    cli.run_phase(experiment.train_selector)
