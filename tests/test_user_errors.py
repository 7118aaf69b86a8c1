"""User errors are declared where they are raised: each derives from ``UserError`` (or, in
``evaluators``, ``InputError``) and keeps its other base, and the shell of every binary ends on
one with one ``error:`` line and exit status 1, while any other error keeps its traceback."""
import pytest

from countermem_jax import cli, domains
from countermem_jax.method.memory.persistence import StoreFormatError
from countermem_jax.method.selector.checkpoint import (CheckpointIntegrityError,
                                                       IncompatibleCheckpointError)
from countermem_jax.phases.config_fingerprint import WorkdirMismatch
from countermem_jax.phases.config_validation import ConfigError
from countermem_jax.phases.workdir import PhaseError
from countermem_jax.protocol.config_files import SettingError
from countermem_jax.protocol.splits import SplitError
from countermem_jax.runtime.errors import UserError
from countermem_jax.runtime.paths import NotUTF8
from countermem_jax.runtime.phase_locks import WorkdirBusy
from evaluators.base import InputError

USER = [(ConfigError, ValueError), (WorkdirMismatch, ValueError), (WorkdirBusy, RuntimeError),
        (NotUTF8, ValueError), (PhaseError, RuntimeError), (SplitError, ValueError),
        (StoreFormatError, ValueError), (CheckpointIntegrityError, ValueError),
        (IncompatibleCheckpointError, ValueError), (SettingError, ValueError),
        (domains.MissingData, FileNotFoundError), (cli.PathError, ValueError)]


@pytest.mark.parametrize("error, other_base", USER, ids=lambda c: c.__name__)
def test_each_user_error_is_a_user_error_and_keeps_its_base(error, other_base):
    assert issubclass(error, UserError) and issubclass(error, other_base)


def test_every_data_loaders_error_is_an_input_error():
    data_errors = [e for e in domains.DATA_ERRORS if e is not domains.MissingData]
    assert len(data_errors) == 6
    assert all(issubclass(e, InputError) and issubclass(e, ValueError) for e in data_errors)


@pytest.mark.parametrize("error", [e for e, _ in USER] + [InputError, PermissionError])
def test_a_user_error_ends_the_binary_in_one_line(error, capsys):
    with pytest.raises(SystemExit) as ended, cli.one_line_errors():
        raise error("the workdir\nwas made with another config")
    assert ended.value.code == 1
    assert capsys.readouterr().err == "error: the workdir was made with another config\n"


def test_any_other_error_is_a_bug_and_keeps_its_traceback():
    with pytest.raises(ValueError, match="a bug"), cli.one_line_errors():
        raise ValueError("a bug")


def test_a_config_files_own_user_error_is_shown_as_itself(tmp_path, capsys, monkeypatch):
    """ml_collections re-raises a ``get_config`` error with its traceback as the text; the line
    is the config file's own message."""
    from absl import flags
    from ml_collections import config_flags
    config = tmp_path / "refusing.py"
    config.write_text("from countermem_jax.protocol.config_files import SettingError\n"
                      "def get_config(arg):\n"
                      "    raise SettingError(f'{arg}: not a setting')\n")
    values = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=values)
    monkeypatch.setattr(flags, "FLAGS", values)
    with pytest.raises(SystemExit) as ended:
        cli.parse_flags_or_exit(["binary", f"--config={config}:big"])
    assert ended.value.code == 1
    assert capsys.readouterr().err == "error: big: not a setting\n"
