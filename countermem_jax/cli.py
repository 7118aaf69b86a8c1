"""The shared shell of every binary: flags, config, logging level, one-line errors, call the
library.

Bad user input (a config field with a value the pipeline cannot run with, a workdir made with
another config or busy with a phase this one may not run beside, overlapping or too small
splits, a broken store or checkpoint, a path the file system refuses: missing, read-only, a file
where a directory is needed, a name that is not UTF-8) ends the binary with one line on stderr and exit status 1, no traceback; the config
itself is validated before anything else runs. The config is locked: an override naming a field
the config does not declare (a typo such as ``splits.n_evall`` for ``splits.n_eval``) is refused
the same way, while the flags are parsed, before any model or data is loaded. SIGINT (Ctrl-C)
ends a binary with one line saying the run can resume and exit status 130
(``one_line_errors``); the phases resume from their logs and stores.
"""
import contextlib
import os
import pathlib
import re
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from countermem_jax.protocol import config_files
from countermem_jax.runtime import file_limits, paths

# Errors caused by what the user gave (config, workdir, data, a store or checkpoint), as
# (module, name); anything else is a bug and keeps its traceback. An error whose module was
# never imported cannot have been raised, so the classes are looked up when an error is caught
# (``user_errors``): a binary that never loads the phases (inspect_store, preflight) does not
# import them, nor JAX through them.
USER_ERRORS = (
    ("countermem_jax.phases.config_validation", "ConfigError"),
    ("countermem_jax.phases.config_fingerprint", "WorkdirMismatch"),
    ("countermem_jax.runtime.phase_locks", "WorkdirBusy"),
    ("countermem_jax.runtime.paths", "NotUTF8"),
    ("countermem_jax.phases.workdir", "PhaseError"),
    ("countermem_jax.protocol.splits", "SplitError"),
    ("countermem_jax.method.memory.persistence", "StoreFormatError"),
    ("countermem_jax.method.selector.checkpoint", "CheckpointIntegrityError"),
    ("countermem_jax.method.selector.checkpoint", "IncompatibleCheckpointError"),
    ("countermem_jax.domains", "DATA_ERRORS"),   # a tuple of the data loaders' errors
)


class PathError(ValueError):
    """A path flag names something the binary cannot use: missing, a file where a directory is
    needed, or a directory it cannot write."""


def user_errors() -> tuple[type, ...]:
    """The classes of ``USER_ERRORS`` whose modules are imported, with ``PathError``."""
    found = [PathError]
    for module, name in USER_ERRORS:
        if module in sys.modules:
            value = getattr(sys.modules[module], name)
            found.extend(value if isinstance(value, tuple) else (value,))
    return tuple(found)


# What the shell prints and returns on SIGINT: 128 + SIGINT, the shell's convention.
INTERRUPTED_STATUS = 130
RESUME_LINE = "interrupted: nothing stored is lost; run the same command again to resume"


def one_line(err: BaseException) -> str:
    """``err`` as one ``error:`` line: an ``OSError`` names its path and the system's reason
    (``/ro/wd/.locks: Read-only file system``), anything else its message with spaces joined."""
    if isinstance(err, OSError) and err.strerror:
        paths = [str(p) for p in (err.filename, err.filename2) if p is not None]
        text = f"{' -> '.join(paths)}: {err.strerror}" if paths else err.strerror
    else:
        text = str(err) or type(err).__name__
    return f"error: {' '.join(text.split())}"


@contextlib.contextmanager
def one_line_errors(interrupted: str = RESUME_LINE, errors: tuple = ()):
    """Ends the binary with one line on stderr, no traceback: a user error (``USER_ERRORS`` and
    the binary's own ``errors``) or an ``OSError`` from the file system (a read-only or full
    disk, a path that is a file, a lock file that cannot be made: the user's path, not a bug)
    with exit status 1, SIGINT with ``interrupted`` and exit status 130."""
    try:
        yield
    except Exception as err:   # noqa: BLE001 -- re-raised below unless a user error
        if not isinstance(err, (*user_errors(), *errors, OSError)):
            raise
        # one write with its newline: a library's thread printing at the same moment (Orbax's
        # after a failed save) cannot land inside the line
        sys.stderr.write(one_line(err) + "\n")
        sys.stderr.flush()
        sys.exit(1)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        sys.exit(INTERRUPTED_STATUS)


def check_utf8(path, flag: str) -> None:
    """Refuses (``PathError``, one line) a path flag whose name is not valid UTF-8."""
    try:
        paths.check_utf8(path, flag)
    except paths.NotUTF8 as err:
        raise PathError(str(err)) from None


def check_workdir(path: str, flag: str = "--workdir") -> None:
    """Refuses a ``--workdir`` (or another output directory's ``flag``) whose name is not valid
    UTF-8, that exists but is not a directory, lies under a file, or cannot be written (a
    read-only mount, no permission), before anything is loaded or made; the file or directory
    stays as it was."""
    check_utf8(path, flag)
    target = pathlib.Path(path)
    for folder in (target, *target.parents):
        if folder.exists():
            if not folder.is_dir():
                what = "is a file" if folder == target else f"lies under the file {folder}"
                raise PathError(
                    f"{flag}={path} {what}, not a directory; give a directory")
            if not os.access(folder, os.W_OK | os.X_OK):   # EROFS holds for root as well
                reason = ("read-only file system" if _read_only(folder)
                          else "no permission to write")
                where = "" if folder == target else f" (under {folder})"
                raise PathError(
                    f"{flag}={path} cannot be written{where}: {reason}; give a writable "
                    "directory")
            return


def existing_dir(path: str, flag: str) -> pathlib.Path:
    """``path`` as a directory to read from, or a ``PathError`` saying in one line that
    it does not exist, is a file or has a name that is not valid UTF-8."""
    check_utf8(path, flag)
    target = pathlib.Path(path)
    if not target.is_dir():
        what = "is a file" if target.exists() else "does not exist"
        raise PathError(f"{flag}={path} {what}; give a directory")
    return target


def _read_only(folder: pathlib.Path) -> bool:
    """True when ``folder`` lies on a file system mounted read-only."""
    return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)


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
        from countermem_jax.phases import config_validation
        with one_line_errors():
            config_validation.validate(cfg)
            file_limits.check(cfg)   # soft RLIMIT_NOFILE to the hard one; warns if too low
            check_workdir(workdir.value)
            phase(cfg, workdir.value)

    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main, flags_parser=parse_flags_or_exit)


def run_main(main, required: tuple[str, ...] = (), interrupted: str = RESUME_LINE,
             errors: tuple = ()) -> None:
    """Runs an absl ``main(argv)`` of a binary that is not a phase (``inspect_store``,
    ``report``, ``preflight``, ``study_cost``, the sweep) with the same shell: a bad flag or
    override in one line, ``required`` flags, user and file-system errors (and the binary's own
    ``errors``) in one line (exit 1), SIGINT in one line (exit 130)."""
    def guarded(argv):
        with one_line_errors(interrupted, errors):
            return main(argv)

    if required:
        flags.mark_flags_as_required(list(required))
    app.run(guarded, flags_parser=parse_flags_or_exit)


def loaded_config(holder, name: str):
    """The config a ``DEFINE_config_file`` flag loaded; a file that could not be loaded (missing,
    unreadable) ends the binary with one line naming the flag and the file, exit status 1.

    ml_collections defers that error to the config's first use, as an object that raises
    ``OSError`` on any attribute; a directory given as the file fails the same way."""
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
    field the locked config lacks; the line names the override and ml_collections' suggestion.
    A config file that cannot be loaded (missing, a directory) raises ``OSError`` here when an
    override is applied to it; the line names the flag and the file."""
    file_limits.raise_soft_limit()   # every binary that parses flags here, before any work
    try:
        return flags.FLAGS(argv)
    except OSError as err:
        detail = str(err).split("earlier failure to load: ", 1)[-1]
        named = re.search(r"Failed loading config file (\w+)_config", detail)
        override = next((a[2:].split(".")[0] for a in argv[1:] if re.match(r"--\w+\.", a)),
                        "config")
        print(f"error: --{named.group(1) if named else override}: {' '.join(detail.split())}",
              file=sys.stderr)
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
        detail = str(err).rsplit(f"{config_files.SettingError.__name__}: ", 1)[-1]
        print(f"error: {' '.join(detail.split())}", file=sys.stderr)
    sys.exit(1)
