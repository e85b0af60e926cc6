"""Plain-text tables for the terminal: the CLI's (``nimbus_tools.cli.render.table``), with a rule
under the headers; columns whose index is in ``right`` are right-aligned."""

from functools import partial

from nimbus_tools.cli.render import table

render = partial(table, rule=True)
