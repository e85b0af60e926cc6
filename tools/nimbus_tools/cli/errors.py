"""The one exception the CLI turns into a message and an exit code (no traceback)."""

from __future__ import annotations

# Exit codes: 1 for a failure (unknown user, AWS error, API not running), 2 for bad input,
# the same code argparse uses for usage errors.
EXIT_FAILURE = 1
EXIT_USAGE = 2


class CliError(Exception):
    """An expected failure: ``message`` is printed to stderr and the command exits ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
