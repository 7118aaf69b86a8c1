"""The shared shell of the three phase binaries: flags, config, logging level, call the library.

Bad user input (a config field with a value the pipeline cannot run with, a workdir made with
another config or busy with the same phase, overlapping or too small splits, a broken store or
checkpoint) ends the binary with one line on stderr and exit status 1, no traceback; the config
itself is validated before anything else runs. The config is locked: an override naming a field
the config does not declare (a typo such as ``splits.n_evall`` for ``splits.n_eval``) is refused
the same way, while the flags are parsed, before any model or data is loaded.
"""
import pathlib
import re
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from countermem_jax.protocol import config_defaults
from countermem_jax.phases import config_fingerprint, config_validation, workdir_guard
from countermem_jax.domains import DATA_ERRORS
from countermem_jax.experiment import PhaseError
from countermem_jax.method.memory.persistence import StoreFormatError
from countermem_jax.method.selector.checkpoint import CheckpointIntegrityError, IncompatibleCheckpointError
from countermem_jax.protocol.splits import SplitError
from countermem_jax.runtime import file_limits

# Errors caused by what the user gave (config, workdir, data); anything else is a bug and
# keeps its traceback.
USER_ERRORS = (config_validation.ConfigError, config_fingerprint.WorkdirMismatch,
               workdir_guard.WorkdirBusy, SplitError, PhaseError, StoreFormatError,
               CheckpointIntegrityError, IncompatibleCheckpointError, FileNotFoundError,
               *DATA_ERRORS)


def check_workdir(path: str) -> None:
    """Refuses a ``--workdir`` that exists but is not a directory (or lies under a file), before
    anything is loaded; the file stays as it was."""
    target = pathlib.Path(path)
    for folder in (target, *target.parents):
        if folder.exists():
            if not folder.is_dir():
                what = "is a file" if folder == target else f"lies under the file {folder}"
                raise config_fingerprint.WorkdirMismatch(
                    f"--workdir={path} {what}, not a directory; give a directory")
            return


def run_phase(phase) -> None:
    """Defines --config and --workdir, then runs ``phase(config, workdir)`` under absl."""
    config = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                             lock_config=True)
    workdir = flags.DEFINE_string("workdir", None, "Where the store, selector, logs and metrics go.")

    def main(argv):
        """absl main: quiet logging unless asked, validate the config, run the phase; user errors
        become one ``error:`` line and exit 1.
        """
        del argv
        if not flags.FLAGS["verbosity"].present:  # progress bars and summaries; -v 0 for INFO logs
            logging.set_verbosity(logging.WARNING)
        cfg = loaded_config(config, "config")
        try:
            config_validation.validate(cfg)
            file_limits.check(cfg)   # soft RLIMIT_NOFILE to the hard one; warns if too low
            check_workdir(workdir.value)
            phase(cfg, workdir.value)
        except USER_ERRORS as err:
            print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
            sys.exit(1)

    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main, flags_parser=parse_flags_or_exit)


def loaded_config(holder, name: str):
    """The config a ``DEFINE_config_file`` flag loaded; a file that could not be loaded (missing,
    unreadable) ends the binary with one line naming the flag and the file, exit status 1.

    ml_collections defers that error to the config's first use, as an object that raises
    ``OSError`` on any attribute."""
    try:
        value = holder.value
        value.keys()
        return value
    except OSError as err:
        print(f"error: --{name}: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(1)


def parse_flags_or_exit(argv: list[str]) -> list[str]:
    """absl's flag parsing, with a bad flag or config override reported in one line (exit 1).

    ml_collections raises AttributeError/KeyError (not a flags error) when an override names a
    field the locked config lacks; the line names the override and ml_collections' suggestion."""
    file_limits.raise_soft_limit()   # every binary that parses flags here, before any work
    try:
        return flags.FLAGS(argv)
    except (AttributeError, KeyError) as err:
        detail = str(err)   # e.g. '\'n_evall\'\nDid you mean "n_eval" instead of "n_evall"?'
        field = re.search(r"\w+", detail).group(0)
        hint = re.search(r'Did you mean \\?"(\w+)', detail)
        override = next((a.split("=")[0] for a in argv[1:] if a.startswith("--")  # --config.,
                         and field in a.split("=")[0].split(".")[1:]), "--config.<field>")
        print(f"error: {override}: the config has no field '{field}'"
              + (f" (did you mean '{hint.group(1)}'?)" if hint else ""), file=sys.stderr)
    except flags.Error as err:
        # a config file's get_config refusing its argument (configs/paper.py:ARG) reaches here
        # wrapped with its traceback by ml_collections; its own one-line message is kept
        detail = str(err).rsplit(f"{config_defaults.SettingError.__name__}: ", 1)[-1]
        print(f"error: {' '.join(detail.split())}", file=sys.stderr)
    sys.exit(1)
