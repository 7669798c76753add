"""Pure argument rules for the tool-input Structs; they raise ValueError, which msgspec reports."""

from __future__ import annotations

import re
import unicodedata
from datetime import date

MAX_FOLDER_BYTES = 1024
MAX_FILTER_BYTES = 1024
MAX_CURSOR_CHARS = 512
MAX_SEARCH_LIMIT = 100
UINT32_MAX = 4_294_967_295
# The JSON Schema pattern of since/before; JSON Schema's \d is ASCII only, and parse_day's
# date.fromisoformat refuses the other digits Python's \d would let through.
DAY_PATTERN = r"^\d{4}-\d{2}-\d{2}$"

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DATE = re.compile(DAY_PATTERN)
_GRAPH_ID = re.compile(r"[A-Za-z0-9_=-]{1,1024}")


def has_control_or_format(text: str) -> bool:
    """Tell whether text holds a Unicode control (Cc) or format (Cf) character."""
    return any(unicodedata.category(ch) in ("Cc", "Cf") for ch in text)


def check_folder_name(name: str, what: str = "folder") -> None:
    """Require a mailbox name of 1-1024 UTF-8 bytes without control or format characters."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # lone surrogates from JSON \ud800 escapes
        raise ValueError(f"{what} must be valid UTF-8") from None
    if not 1 <= size <= MAX_FOLDER_BYTES:
        raise ValueError(f"{what} must be 1-{MAX_FOLDER_BYTES} UTF-8 bytes")
    if has_control_or_format(name):
        raise ValueError(f"{what} must not contain control or format characters")


def check_filter_text(value: str, what: str, *, allow_controls: bool = False) -> None:
    """Require a search text of at most 1024 UTF-8 bytes without CR, LF or NUL."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{what} must be valid UTF-8") from None
    if size > MAX_FILTER_BYTES:
        raise ValueError(f"{what} must be at most {MAX_FILTER_BYTES} UTF-8 bytes")
    if any(ch in value for ch in "\r\n\x00"):
        raise ValueError(f"{what} must not contain CR, LF or NUL")
    if not allow_controls and has_control_or_format(value):
        raise ValueError(f"{what} must not contain control or format characters")


def parse_day(value: str, what: str) -> date:
    """Parse a YYYY-MM-DD calendar day."""
    if not _DATE.fullmatch(value):
        raise ValueError(f"{what} must be a YYYY-MM-DD date")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{what} must be a real calendar date") from None


def check_whole(pattern: str, value: str, what: str) -> None:
    """Require the whole value to match a schema pattern.

    msgspec applies a Meta pattern with re.search, where `$` also matches before a final
    newline; JSON Schema's `$` does not, so a Struct repeats the check with fullmatch.
    """
    if re.fullmatch(pattern, value) is None:
        raise ValueError(f"{what} must match {pattern}")


def check_hex(value: str, length: int, what: str) -> None:
    """Require exactly `length` lowercase hex characters."""
    pattern = _HEX32 if length == 32 else _HEX64
    if not pattern.fullmatch(value):
        raise ValueError(f"{what} must be {length} lowercase hex characters")


def check_graph_id(value: str, what: str) -> None:
    """Require a Microsoft Graph identifier of 1-1024 characters from [A-Za-z0-9_=-]."""
    if not _GRAPH_ID.fullmatch(value):
        raise ValueError(f"{what} must be 1-1024 characters from A-Z a-z 0-9 _ = -")
