"""Config files by path, as ml_collections' ``config_flags`` loads them: ``FILE.py`` or
``FILE.py:ARG`` (ARG goes to the file's ``get_config``). The library receives configs; it names
no file of ``configs/``, whose files import this module, not the reverse."""
import importlib.util
import pathlib

import ml_collections

from countermem_jax.runtime.errors import UserError


class SettingError(UserError, ValueError):
    """``configs/paper.py`` was given an argument naming no setting."""


def load_module(path):
    """The Python file at ``path``, executed as a module of its own (not as part of a package)."""
    path = pathlib.Path(path)
    spec = importlib.util.spec_from_file_location(f"config_file_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(spec: str) -> ml_collections.ConfigDict:
    """``FILE.py`` or ``FILE.py:ARG`` -> the file's ``get_config()`` or ``get_config(ARG)``."""
    path, _, arg = str(spec).partition(":")
    module = load_module(path)
    return module.get_config(arg) if arg else module.get_config()
