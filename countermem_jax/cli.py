"""The shared shell of every binary: flags, config, logging level, one-line errors, call the
library.

Bad user input ends a binary with one ``error:`` line on stderr and exit status 1, no traceback:
an error of the user's (a ``UserError``, declared where the input is checked: config, workdir,
splits, store, checkpoint, path; a data loader's ``InputError``), a path the file system refuses
(``OSError``: missing, read-only, a file where a directory is needed), and a flag or override
absl or ml_collections refuse, in their own words. The config is locked, so an override naming
a field it does not declare is refused while the flags are parsed; our own checks
(``phases.config_validation``) run next, before any model or data is loaded. SIGINT (Ctrl-C)
ends a binary with one line saying the run can resume and exit status 130; the phases resume
from their logs and stores.
"""
import contextlib
import os
import pathlib
import sys
from typing import NoReturn

from absl import app, flags, logging
from ml_collections import config_flags

from countermem_jax.runtime import file_limits, paths
from countermem_jax.runtime.errors import UserError
from evaluators.base import InputError

# What the user gave and the binary cannot use; anything else is a bug and keeps its traceback.
USER_ERRORS = (UserError, InputError, OSError)


class PathError(UserError, ValueError):
    """A path flag names something the binary cannot use: missing, a file where a directory is
    needed, or a directory it cannot write."""


# What the shell prints and returns on SIGINT: 128 + SIGINT, the shell's convention.
INTERRUPTED_STATUS = 130
RESUME_LINE = "interrupted: nothing stored is lost; run the same command again to resume"


def message(err: BaseException) -> str:
    """``err``'s message on one line: an ``OSError`` names its path and the system's reason
    (``/ro/wd/.locks: Read-only file system``), a ``KeyError`` its message (not its repr),
    anything else its message with spaces joined."""
    if isinstance(err, OSError) and err.strerror:
        paths = [str(p) for p in (err.filename, err.filename2) if p is not None]
        text = f"{' -> '.join(paths)}: {err.strerror}" if paths else err.strerror
    elif isinstance(err, KeyError) and err.args:
        text = str(err.args[0])
    else:
        text = str(err) or type(err).__name__
    return " ".join(text.split())


def one_line(err: BaseException) -> str:
    """``err`` as one ``error:`` line."""
    return f"error: {message(err)}"


def _exit_with(line: str) -> NoReturn:
    """Ends the binary with ``line`` on stderr, exit status 1."""
    # one write with its newline: a library's thread printing at the same moment (Orbax's after
    # a failed save) cannot land inside the line
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    sys.exit(1)


@contextlib.contextmanager
def one_line_errors(interrupted: str = RESUME_LINE):
    """Ends the binary with one line on stderr, no traceback: a ``USER_ERRORS`` error (the
    user's input, or the file system refusing the user's path: a read-only or full disk, a path
    that is a file) with exit status 1, SIGINT with ``interrupted`` and exit status 130."""
    try:
        yield
    except USER_ERRORS as err:
        _exit_with(one_line(err))
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


def run_main(main, required: tuple[str, ...] = (), interrupted: str = RESUME_LINE) -> None:
    """Runs an absl ``main(argv)`` of a binary that is not a phase (``inspect_store``,
    ``report``, ``preflight``, ``study_cost``, the sweep) with the same shell: a bad flag or
    override in one line, ``required`` flags, user and file-system errors in one line (exit 1),
    SIGINT in one line (exit 130)."""
    def guarded(argv):
        with one_line_errors(interrupted):
            return main(argv)

    if required:
        flags.mark_flags_as_required(list(required))
    app.run(guarded, flags_parser=parse_flags_or_exit)


def loaded_config(holder, name: str):
    """The config a ``DEFINE_config_file`` flag loaded; a file that could not be loaded (missing,
    unreadable, a directory) ends the binary with one line naming the flag, exit status 1.

    ml_collections defers that error to the config's first use, as an object that raises
    ``OSError`` on any attribute."""
    try:
        value = holder.value
        value.keys()
        return value
    except OSError as err:
        _exit_with(f"error: --{name}: {message(err)}")


def parse_flags_or_exit(argv: list[str]) -> list[str]:
    """absl's flag parsing, with a flag or config override absl or ml_collections refuse
    reported in one line in their words (exit 1).

    ml_collections raises ``KeyError``/``IndexError`` (or ``AttributeError`` around a
    ``KeyError``) for an override naming a field the locked config lacks, ``ValueError`` for an
    override path it cannot parse, ``OSError`` for an override applied to a config file it could
    not load; absl raises ``flags.Error`` for a bad flag or value, and for a config file whose
    ``get_config`` refused its argument (``configs/paper.py:ARG``), whose own ``UserError`` is
    in the chain (ml_collections re-raises it with its traceback as the text) and is shown."""
    file_limits.raise_soft_limit()   # every binary that parses flags here, before any work
    try:
        return flags.FLAGS(argv)
    except (LookupError, AttributeError) as err:
        key_error = err.args[0] if err.args and isinstance(err.args[0], KeyError) else err
        _exit_with(f"error: no such config field: {message(key_error)}")
    except (flags.Error, ValueError, OSError, UserError) as err:
        chain = [err]
        while chain[-1].__context__ is not None:
            chain.append(chain[-1].__context__)
        _exit_with(one_line(next((e for e in reversed(chain) if isinstance(e, UserError)), err)))
