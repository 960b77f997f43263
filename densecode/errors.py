"""One exception type for user-facing failures.

The CLI catches `DensecodeError`, prints its message (no traceback) and exits
with code 2, so every bad-input path in the project raises this with a message
that names the thing and says how to fix it.
"""


class DensecodeError(Exception):
    """A user-facing error: bad input, missing file, broken config, unloadable model."""

    exit_code = 2


class ConfigError(DensecodeError):
    """A configuration file or override is invalid."""
