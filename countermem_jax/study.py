"""Runs a study config and writes ``WORKDIR/study.json``.

    python -m countermem_jax.study --config=configs/studies/retrieval.py:cpu --workdir=/tmp/study
"""
from absl import flags
from ml_collections import config_flags

from countermem_jax.runtime import jax_platform

jax_platform.choose_platform()  # before JAX is imported: CPU unless --jax_gpu, no preallocation

from countermem_jax import cli  # noqa: E402
from countermem_jax.studies import runner  # noqa: E402


def _run(study, workdir):
    path = config_flags.get_config_filename(flags.FLAGS["config"])
    runner.run_any(study, workdir, config_path=path)


if __name__ == "__main__":
    cli.run_phase(_run)
