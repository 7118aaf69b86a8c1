"""The shared shell of the three phase binaries: flags, config, logging level, call the library."""
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
        from countermem_jax.splits import SplitError
        try:
            phase(config.value, workdir.value)
        except SplitError as err:  # bad split settings: one line, nothing stored is touched
            raise SystemExit(f"error: {err}") from None

    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main)
