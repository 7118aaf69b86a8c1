"""The shared shell of the three phase binaries: flags, config, logging level, call the library."""
import sys

from absl import app, flags, logging
from ml_collections import config_flags


def run_phase(phase) -> None:
    """Defines --config and --workdir, then runs ``phase(config, workdir)`` under absl."""
    config = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
    workdir = flags.DEFINE_string("workdir", None, "Where the store, selector, logs and metrics go.")

    def main(argv):
        del argv
        if not flags.FLAGS["verbosity"].present:  # progress bars and summaries; -v 0 for INFO logs
            logging.set_verbosity(logging.WARNING)
        from countermem_jax.domains import MissingData
        try:
            phase(config.value, workdir.value)
        except MissingData as err:   # data not there: one line saying how to get it
            sys.exit(f"error: {err}")

    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main)
