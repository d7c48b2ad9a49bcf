"""The one exception type for "the user asked for something that cannot work".

Validation anywhere in rlcore (a missing observation group, an unknown class name or option, a checkpoint
that does not fit, a task setting of the wrong type) raises :class:`ConfigError`. The command-line entry
points report it as one line with exit status 2; every other exception is a bug (in rlcore or in the user's
own code) and is reported with its full traceback. ``ConfigError`` subclasses ``ValueError`` and ``TypeError``
(the two exceptions validation raised before it existed), so code that already catches them keeps working.

This module imports nothing from rlcore: every layer (tasks included, through ``rlcore.env``) may raise it.
"""

from __future__ import annotations


class ConfigError(ValueError, TypeError):
    """A configuration, command-line value or file named by the user cannot work; the message says what to do."""


class MissingPathError(ConfigError, FileNotFoundError):
    """A file or directory that the user named does not exist (a checkpoint, a run directory).

    Raised where the user's path is checked, so that it is reported as a user error; a ``FileNotFoundError`` raised
    anywhere else (a file missing from rlcore's own installation) stays a bug with its traceback. It is a
    ``FileNotFoundError`` too, for code that already catches that.
    """


__all__ = ["ConfigError", "MissingPathError"]
