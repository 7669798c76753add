"""The MCP Bundle's entry point: `angelos serve --transport stdio`, blank settings left unset."""

from __future__ import annotations

import os
import re
import sys
from importlib.metadata import entry_points

# Claude Desktop passes a user_config field the user left blank as the literal text
# `${user_config.KEY}` instead of an empty value. angelos would take that text as the setting
# and refuse it (or, for a password, use it), so such a variable is removed: unset, angelos
# uses its default or the env file's value, as the manifest's description promises.
_UNFILLED = re.compile(r"\$\{user_config\.[A-Za-z0-9_]+\}")


def main() -> int:
    """Drop the unfilled settings and run the installed `angelos` command on stdio."""
    for name, value in list(os.environ.items()):
        if _UNFILLED.fullmatch(value):
            del os.environ[name]
    # The console script, found by its name, so this file does not depend on angelos's modules.
    (command,) = entry_points(group="console_scripts", name="angelos")
    status = command.load()(["serve", "--transport", "stdio"])
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
