"""Phase 1: builds the counterfactual memory store on the construction split.

    python -m countermem_jax.build_memory --config=configs/spider_react_cpu.py --workdir=/tmp/cm
"""
from countermem_jax.runtime import jax_platform

jax_platform.choose_platform()  # before JAX is imported: CPU unless --jax_gpu, no preallocation

from countermem_jax import cli, experiment  # noqa: E402

if __name__ == "__main__":
    cli.run_phase(experiment.build_memory)
