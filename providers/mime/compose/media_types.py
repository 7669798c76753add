"""Parse and re-serialize MIME media types and disposition parameters (RFC 2045, RFC 2231)."""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from msgspec import Struct

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_QUOTED = re.compile(r'"((?:[^"\\\r\n]|\\[^\r\n])*)"')
_SPACE = re.compile(r"[ \t]*")
_ATTRIBUTE_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$&+-.^_`|~"
)
_EXTENDED = re.compile(r"([^']*)'[^']*'(.*)", re.DOTALL)


class MediaType(Struct, frozen=True):
    """A parsed media type: lower-case `type/subtype` and its parameters with lower-case names."""

    essence: str
    params: dict[str, str]

    def format(self) -> str:
        """Serialize as `type/subtype; name=value` with parameters sorted by name."""
        return format_parameters(self.essence, self.params)


def parse_media_type(value: str) -> MediaType:
    """Parse `type/subtype *(; name=value)`; raise ValueError for anything malformed."""
    position = _SPACE.match(value, 0)
    assert position is not None
    index = position.end()
    essence = _TOKEN.match(value, index)
    if essence is None or value[essence.end() : essence.end() + 1] != "/":
        raise ValueError("media type needs type/subtype")
    subtype = _TOKEN.match(value, essence.end() + 1)
    if subtype is None:
        raise ValueError("media type needs type/subtype")
    params: dict[str, str] = {}
    index = subtype.end()
    while True:
        index = _skip_space(value, index)
        if index == len(value):
            break
        if value[index] != ";":
            raise ValueError("media type parameters must be separated by ';'")
        index = _skip_space(value, index + 1)
        if index == len(value):
            break
        name_match = _TOKEN.match(value, index)
        if name_match is None:
            raise ValueError("bad parameter name")
        name = name_match.group(0).lower()
        index = _skip_space(value, name_match.end())
        if value[index : index + 1] != "=":
            raise ValueError("parameter needs a value")
        index = _skip_space(value, index + 1)
        quoted = _QUOTED.match(value, index)
        if quoted is not None:
            text = re.sub(r"\\(.)", r"\1", quoted.group(1))
            index = quoted.end()
        else:
            token = _TOKEN.match(value, index)
            if token is None:
                raise ValueError("bad parameter value")
            text = token.group(0)
            index = token.end()
        if name.endswith("*"):
            name, text = name[:-1], _decode_extended(text)
        if "*" in name or name in params:
            raise ValueError("parameter continuations and duplicates are not supported")
        params[name] = text
    return MediaType(f"{essence.group(0)}/{subtype.group(0)}".lower(), params)


def _skip_space(value: str, index: int) -> int:
    match = _SPACE.match(value, index)
    assert match is not None
    return match.end()


def _decode_extended(text: str) -> str:
    """Decode an RFC 2231 `charset'language'percent-encoded` value (UTF-8 or ASCII only)."""
    match = _EXTENDED.fullmatch(text)
    if match is None or match.group(1).lower() not in ("utf-8", "us-ascii", ""):
        raise ValueError("unsupported extended parameter")
    return unquote_to_bytes(match.group(2)).decode("utf-8")


def format_parameters(essence: str, params: dict[str, str]) -> str:
    """Serialize a value with parameters: tokens bare, ASCII quoted, non-ASCII per RFC 2231."""
    parts = [essence]
    for name in sorted(params):
        value = params[name]
        if _TOKEN.fullmatch(value):
            parts.append(f"{name}={value}")
        elif value.isascii():
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            parts.append(f'{name}="{escaped}"')
        else:
            encoded = "".join(
                chr(byte) if chr(byte) in _ATTRIBUTE_CHARS else f"%{byte:02X}"
                for byte in value.encode("utf-8")
            )
            parts.append(f"{name}*=utf-8''{encoded}")
    return "; ".join(parts)
