"""The base of errors caused by what the user gave (a config, a workdir, data, a store, a
checkpoint, a path): a binary ends on one with one ``error:`` line and exit status 1, no
traceback (``countermem_jax.cli``). Anything else is a bug and keeps its traceback."""


class UserError(Exception):
    """The user's input cannot be used; the message says why in one line."""
