"""Phase 3: evaluates the base agent with and without CounterMem on held-out tasks.

    python -m countermem_jax.evaluate --config=configs/spider_react_cpu.py --workdir=/tmp/cm
"""
from absl import app, flags, logging
from ml_collections import config_flags

from countermem_jax import experiment

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Where the store, selector, logs and metrics go.")


def main(argv):
    del argv
    if not flags.FLAGS["verbosity"].present:  # progress bars and summaries; -v 0 for INFO logs
        logging.set_verbosity(logging.WARNING)
    experiment.evaluate(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main)
