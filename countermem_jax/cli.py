"""The shared shell of the three phase binaries: flags, config, logging level, call the library.

Bad user input (a config field with a value the pipeline cannot run with, a workdir made with
another config or busy with the same phase, overlapping or too small splits, a broken store or
checkpoint) ends the binary with one line on stderr and exit status 1, no traceback; the config
itself is validated before anything else runs.
"""
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from countermem_jax import config_validation, workdir_guard
from countermem_jax.domains import MissingData
from countermem_jax.experiment import PhaseError
from countermem_jax.memory.persistence import StoreFormatError
from countermem_jax.selector.checkpoint import CheckpointIntegrityError, IncompatibleCheckpointError
from countermem_jax.splits import SplitError

USER_ERRORS = (config_validation.ConfigError, workdir_guard.WorkdirMismatch,
               workdir_guard.WorkdirBusy, SplitError, PhaseError, StoreFormatError,
               CheckpointIntegrityError, IncompatibleCheckpointError, MissingData,
               FileNotFoundError)


def run_phase(phase) -> None:
    """Defines --config and --workdir, then runs ``phase(config, workdir)`` under absl."""
    config = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
    workdir = flags.DEFINE_string("workdir", None, "Where the store, selector, logs and metrics go.")

    def main(argv):
        del argv
        if not flags.FLAGS["verbosity"].present:  # progress bars and summaries; -v 0 for INFO logs
            logging.set_verbosity(logging.WARNING)
        try:
            config_validation.validate(config.value)
            phase(config.value, workdir.value)
        except USER_ERRORS as err:
            print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
            sys.exit(1)

    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main)
