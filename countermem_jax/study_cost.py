"""Prints the upper bound on a study's LLM calls, from its config alone: nothing runs, no model
or data is loaded (``studies/cost.py``, ``studies/protocol_cost.py``; docs/studies.md).

    python -m countermem_jax.study_cost --config=configs/studies/accumulation.py
    python -m countermem_jax.study_cost --config=configs/studies/components.py:four_domains
"""
from absl import flags
from ml_collections import config_flags

from countermem_jax import cli
from countermem_jax.studies import protocol_cost

_CONFIG = config_flags.DEFINE_config_file("config", None, "Study config file.", lock_config=True)


def main(argv):
    del argv
    bound = protocol_cost.requests(cli.loaded_config(_CONFIG, "config"))
    for name, value in {**bound.pop("settings", {}), **bound}.items():
        print(f"{name:<24} {value:>12,}")


if __name__ == "__main__":
    cli.run_main(main, required=("config",), interrupted="interrupted: nothing was written")
