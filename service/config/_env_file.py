"""The optional env file: `NAME=value` lines read only from a path the operator names.

MCP clients start stdio servers with almost no environment, so `--env-file PATH` (or
ANGELOS_ENV_FILE) lets the settings live in one private file. Parsing is strict and a refused
file is used not at all; a problem names the line, never its value. The format is documented in
docs/configuration.md ("The env file").
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Final

from service.config._model import EnvFileInfo
from service.config._values import has_control, value_of
from service.config.table.variables import BY_NAME, VARIABLES

ENV_FILE: Final = "ANGELOS_ENV_FILE"
MAX_ENV_FILE_BYTES: Final = 64 * 1024
_ASSIGNMENT = re.compile(r"([A-Z][A-Z0-9_]*)=(.*)", re.ASCII | re.DOTALL)
_BLANK = frozenset(" \t")


def parse_env_text(text: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """Parse the file's text into assignments, or collect one problem per refused line."""
    values: dict[str, str] = {}
    first_line: dict[str, int] = {}
    problems: list[str] = []
    if "\r" in text:  # one problem, not one per line of a file saved with CRLF
        first = text.count("\n", 0, text.index("\r")) + 1
        return {}, (_problem(first, "holds a carriage return; save it with Unix line endings"),)
    for number, line in enumerate(text.split("\n"), start=1):
        if number == 1 and line.startswith("\ufeff"):
            problems.append(_problem(number, "starts with a byte-order mark; save as plain UTF-8"))
            continue
        if not line.strip(" \t") or line.lstrip(" \t").startswith("#"):
            continue
        parsed = _assignment(line)
        if isinstance(parsed, str):
            problems.append(_problem(number, parsed))
            continue
        name, value = parsed
        if name in first_line:
            problems.append(_problem(number, f"{name} repeats line {first_line[name]}"))
            continue
        first_line[name] = number
        values[name] = value
    return values, tuple(problems)


def _problem(number: int, reason: str) -> str:
    return f"{ENV_FILE}: line {number}: {reason}"


def _assignment(line: str) -> tuple[str, str] | str:
    """Split one line into (name, value), or explain why it is refused without quoting it."""
    if line[0] in _BLANK:
        return "starts with whitespace; write NAME=value at the start of the line"
    match = _ASSIGNMENT.fullmatch(line)
    if match is None:
        if line.startswith("export ") or line.startswith("export\t"):
            return "`export` is not allowed; write NAME=value"
        head = line.split("=", 1)[0]
        if "=" in line and head.rstrip(" \t") != head:
            return "no spaces around =; write NAME=value"
        return "is not NAME=value (names are upper-case letters, digits and _)"
    name, raw = match.group(1), match.group(2)
    variable = BY_NAME.get(name)
    if variable is None:
        shown = name if len(name) <= 64 else "the name"
        return f"{shown} is not a variable angelos reads"
    if not variable.in_env_file:
        return f"{name} cannot be set in an env file"
    return _value(name, raw)


def _value(name: str, raw: str) -> tuple[str, str] | str:
    if raw[:1] in ("'", '"'):
        quote = raw[0]
        if len(raw) < 2 or not raw.endswith(quote) or quote in raw[1:-1]:
            return f"the value of {name} opens a {quote} quote that does not close at its end"
        value = raw[1:-1]
    elif raw != raw.strip(" \t"):
        return f"the value of {name} has surrounding whitespace; quote it if it is meant"
    else:
        value = raw
    if has_control(value):  # tabs included: they are invisible in an editor
        return f"the value of {name} holds a control character"
    return name, value


def read_env_file(path: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """Read and parse the named file; a file holding a secret must be private to its owner."""
    if path.startswith("~"):
        return {}, (f"{ENV_FILE}: ~ is not expanded here; give the absolute path",)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}, (f"{ENV_FILE}: no such file",)
    except (OSError, ValueError):  # permissions, a directory, NUL bytes in the path
        return {}, (f"{ENV_FILE}: cannot be opened for reading",)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return {}, (f"{ENV_FILE}: must be a regular file",)
        data = _read_limited(fd)
    except OSError:
        return {}, (f"{ENV_FILE}: cannot be read",)
    finally:
        os.close(fd)
    if data is None:
        return {}, (f"{ENV_FILE}: must be at most {MAX_ENV_FILE_BYTES // 1024} KiB",)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return {}, (_problem(line, "is not valid UTF-8"),)
    values, problems = parse_env_text(text)
    if problems:
        return {}, problems
    secrets = [v.name for v in VARIABLES if v.secret and values.get(v.name)]
    private = info.st_uid == os.geteuid() and info.st_mode & 0o077 == 0
    if secrets and not private:
        return {}, (
            f"{ENV_FILE}: holds {', '.join(secrets)}, so it must be yours and private"
            " (chmod 600 it; mode 0600 or 0400)",
        )
    return values, ()


def _read_limited(fd: int) -> bytes | None:
    """Read the whole file, or return None once it exceeds the size limit."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, MAX_ENV_FILE_BYTES + 1 - size)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ENV_FILE_BYTES:
            return None


def with_env_file(
    environ: Mapping[str, str], named: str | None = None
) -> tuple[dict[str, str], EnvFileInfo | None]:
    """Return the environment completed from the named env file (flag first, then variable).

    Only an explicitly named path is read, never a file found by itself. A variable the real
    environment sets (non-empty) wins over the file; a refused file contributes nothing.
    """
    path = named or value_of(environ, ENV_FILE)
    env = dict(environ)
    if path is None:
        return env, None
    values, problems = read_env_file(path)
    taken = tuple(name for name in values if value_of(environ, name) is None)
    for name in taken:
        env[name] = values[name]
    return env, EnvFileInfo(path=path, names=taken, problems=problems)
