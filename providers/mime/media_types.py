"""Content-Type and Content-Disposition values with their parameters (RFC 2045, 2183, 2231).

One parser in two modes. Strict (caller content types, drafts) accepts `value *(; name=value)`
with token or quoted values, single-segment RFC 2231 values in UTF-8 or ASCII and no repeated
names, and raises ValueError for anything else. Lenient (reading mail) never raises: it takes
what real mail sends (unquoted values of any characters, RFC 2231 continuations in any
charset), skips what it cannot read, and lets a plain parameter win over an RFC 2231 one of
the same name, as the stdlib's reader does.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from msgspec import Struct

from providers.mime.charsets import decode_text

_TOKEN_TEXT = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_TOKEN = re.compile(_TOKEN_TEXT)
_MEDIA_TYPE = re.compile(rf"{_TOKEN_TEXT}/{_TOKEN_TEXT}")
_STRICT_PARAMETER = re.compile(
    rf'[ \t]*({_TOKEN_TEXT})[ \t]*=[ \t]*(?:"((?:[^"\\\r\n]|\\[^\r\n])*)"|({_TOKEN_TEXT}))[ \t]*'
)
_BLANK = re.compile(r"[ \t]*")
# One ';'-separated piece: a ';' inside a quoted string (even an unterminated one) is text.
_PIECE = re.compile(r'(?:[^";]+|"(?:[^"\\]|\\.)*(?:"|\\?\Z))*', re.DOTALL)
_ANY_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_QUOTE_ESCAPE = re.compile(r'\\([\\"])')
# RFC 2231 names: `name*` (one encoded value), `name*0`, `name*1*` (continuations). Section
# numbers have at most 3 digits: int() refuses thousands of digits, and no value has 1,000.
_SECTION = re.compile(r"([!#$%&'+\-.^_`|~0-9A-Za-z]+)\*(?:([0-9]{1,3})\*?)?")
_EXTENDED = re.compile(r"([^']*)'[^']*'(.*)", re.DOTALL)
_STRICT_CHARSETS = ("utf-8", "us-ascii", "")
_ATTRIBUTE_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$&+-.^_`|~"
)


class MediaType(Struct, frozen=True):
    """A media type: lower-case `type/subtype` ("" when lenient parsing found none) and its
    parameters with lower-case names."""

    essence: str
    params: dict[str, str]

    def format(self) -> str:
        """Serialize for the wire: `type/subtype; name=value` with parameters sorted by name."""
        return format_parameters(self.essence, self.params)


class Disposition(Struct, frozen=True):
    """A Content-Disposition: its lower-case kind ("attachment", "inline", ...) and parameters."""

    kind: str
    params: dict[str, str]


def parse_media_type(value: str, *, strict: bool) -> MediaType:
    """Parse `type/subtype *(; name=value)`; strict raises ValueError for anything malformed."""
    head, params = _parse(value, strict)
    if _MEDIA_TYPE.fullmatch(head) is None:
        if strict:
            raise ValueError("media type needs type/subtype")
        head = ""
    return MediaType(head.lower(), params)


def parse_disposition(value: str, *, strict: bool) -> Disposition:
    """Parse `kind *(; name=value)`; strict raises ValueError for anything malformed."""
    head, params = _parse(value, strict)
    if strict and _TOKEN.fullmatch(head) is None:
        raise ValueError("a disposition needs a token")
    return Disposition(head.lower(), params)


def _parse(value: str, strict: bool) -> tuple[str, dict[str, str]]:
    """Split a value into its stripped first piece and its parameters."""
    pieces = _pieces(value)
    if strict:
        return pieces[0].strip(" \t"), _strict_params(pieces)
    return pieces[0].strip(), _lenient_params(pieces)


def _pieces(value: str) -> list[str]:
    """Split at every ';' outside quoted strings."""
    if '"' not in value:
        return value.split(";")
    pieces: list[str] = []
    position = 0
    while True:
        match = _PIECE.match(value, position)
        assert match is not None  # the pattern matches the empty string
        pieces.append(value[position : match.end()])
        if match.end() >= len(value):
            return pieces
        position = match.end() + 1


def _strict_params(pieces: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for index, piece in enumerate(pieces[1:], start=2):
        if _BLANK.fullmatch(piece) and index == len(pieces):
            break  # a trailing ';'
        match = _STRICT_PARAMETER.fullmatch(piece)
        if match is None:
            raise ValueError('parameters must be `; name=token` or `; name="quoted"`')
        name = match.group(1).lower()
        quoted = match.group(2)
        text = match.group(3) if quoted is None else _ANY_ESCAPE.sub(r"\1", quoted)
        if name.endswith("*"):
            name, text = name[:-1], _strict_extended(text)
        if "*" in name or name in params:
            raise ValueError("parameter continuations and duplicates are not supported")
        params[name] = text
    return params


def _strict_extended(text: str) -> str:
    """Decode an RFC 2231 `charset'language'percent-encoded` value (UTF-8 or ASCII only)."""
    match = _EXTENDED.fullmatch(text)
    if match is None or match.group(1).lower() not in _STRICT_CHARSETS:
        raise ValueError("unsupported extended parameter")
    return unquote_to_bytes(match.group(2)).decode("utf-8")


def _lenient_params(pieces: list[str]) -> dict[str, str]:
    plain: dict[str, str] = {}
    sections: dict[str, list[tuple[int, str, bool]]] = {}
    for piece in pieces[1:]:
        raw_name, equals, raw_value = piece.partition("=")
        name = raw_name.strip().lower()
        if not equals or _TOKEN.fullmatch(name) is None:
            continue
        text = raw_value.strip()
        if len(text) >= 2 and text[0] == text[-1] == '"':
            text = _QUOTE_ESCAPE.sub(r"\1", text[1:-1])
        section = _SECTION.fullmatch(name)
        if section is None:
            plain.setdefault(name, text)
        else:
            number = int(section.group(2) or 0)
            sections.setdefault(section.group(1), []).append((number, text, name.endswith("*")))
    for name, found in sections.items():
        plain.setdefault(name, _joined_sections(found))
    return plain


def _joined_sections(found: list[tuple[int, str, bool]]) -> str:
    """Join RFC 2231 sections in number order; decode the encoded ones in the declared charset."""
    found.sort(key=lambda section: section[0])
    if not any(encoded for _, _, encoded in found):
        return "".join(text for _, text, _ in found)
    charset: str | None = None
    data: list[bytes] = []
    for index, (_, text, encoded) in enumerate(found):
        if not encoded:
            data.append(text.encode("utf-8"))
            continue
        declared = _EXTENDED.fullmatch(text) if index == 0 else None
        if declared is not None:
            charset, text = declared.group(1) or None, declared.group(2)
        data.append(unquote_to_bytes(text))
    return decode_text(b"".join(data), charset)[0]


def format_parameters(essence: str, params: dict[str, str], *, wire: bool = True) -> str:
    """Serialize a value with parameters: tokens bare, others quoted.

    For the wire, parameters are sorted by name and a non-ASCII value is written per RFC 2231;
    for display they keep their order and every value stays text.
    """
    parts = [essence]
    for name in sorted(params) if wire else params:
        value = params[name]
        if _TOKEN.fullmatch(value):
            parts.append(f"{name}={value}")
        elif value.isascii() or not wire:
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            parts.append(f'{name}="{escaped}"')
        else:
            encoded = "".join(
                chr(byte) if chr(byte) in _ATTRIBUTE_CHARS else f"%{byte:02X}"
                for byte in value.encode("utf-8")
            )
            parts.append(f"{name}*=utf-8''{encoded}")
    return "; ".join(parts)
