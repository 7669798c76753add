"""Rules for variables that name a file angelos reads (checked when the configuration loads)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from service.config._rules import value_of


def load_ca_file(env: Mapping[str, str], name: str, problems: list[str]) -> str | None:
    """Return the CA bundle path the variable names, or None when unset or unreadable."""
    path = value_of(env, name)
    if path is None:
        return None
    try:
        readable = os.path.isfile(path) and os.access(path, os.R_OK)
    except (OSError, ValueError):  # NUL bytes or unencodable names
        readable = False
    if not readable:
        problems.append(f"{name}: must name an existing readable file")
        return None
    return path
