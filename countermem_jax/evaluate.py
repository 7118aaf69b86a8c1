"""Phase 3: evaluates the base agent with and without CounterMem on held-out tasks.

    python -m countermem_jax.evaluate --config=configs/spider_react_cpu.py --workdir=/tmp/cm

Prints mean [95% CI] over selector seeds and the cost of building (``WORKDIR/metrics.json``).
"""
from countermem_jax.runtime import jax_platform

jax_platform.choose_platform()  # before JAX is imported: CPU unless --jax_gpu, no preallocation

from countermem_jax import cli, experiment  # noqa: E402

if __name__ == "__main__":
    cli.run_phase(experiment.evaluate)
