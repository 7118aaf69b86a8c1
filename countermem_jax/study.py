"""Runs a study config: every variant's three phases, then ``WORKDIR/study.json`` and a table.

    python -m countermem_jax.study --config=configs/studies/retrieval.py:cpu --workdir=/tmp/study

See ``countermem_jax.studies`` (configs and the study.json schema) and ``configs/studies/``.
"""
from absl import flags
from ml_collections import config_flags

from countermem_jax import cli
from countermem_jax.studies import runner


def _run(study, workdir):
    path = config_flags.get_config_filename(flags.FLAGS["config"])
    runner.run_study(study, workdir, config_path=path)


if __name__ == "__main__":
    cli.run_phase(_run)
