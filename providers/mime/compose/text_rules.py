"""Pure text rules of composition: UTF-8 and control checks, newlines, Message-IDs, subjects."""

from __future__ import annotations

import re

from providers.mime.compose import limits
from schemas.errors import InvalidArguments

# Unicode category Cc is exactly U+0000-U+001F and U+007F-U+009F.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_BODY_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_ATEXT = re.compile(r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+")
_DOMAIN_LITERAL = re.compile(r"\[[\x21-\x5a\x5e-\x7e]*\]")
_LEADING_RE = re.compile(r"^(?:re:\s*)+", re.IGNORECASE)
_LEADING_FWD = re.compile(r"^(?:fwd?:\s*)+", re.IGNORECASE)
_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_length(value: str) -> int | None:
    """Return the UTF-8 byte length of `value`, or None when it is not encodable (surrogates)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def has_control(value: str) -> bool:
    """Tell whether `value` holds a Unicode control character (category Cc, C0 and C1)."""
    return _CONTROL.search(value) is not None


def is_header_text(value: str) -> bool:
    """Tell whether `value` is valid UTF-8 without any control character (header-safe text)."""
    return utf8_length(value) is not None and not has_control(value)


def is_valid_body(value: str) -> bool:
    """Apply the body validator: valid UTF-8, at most 1 MiB, controls only CR, LF and TAB."""
    size = utf8_length(value)
    if size is None or size > limits.MAX_BODY_BYTES:
        return False
    return _BODY_CONTROL.search(value) is None


def check_body(value: str, field: str) -> None:
    """Raise InvalidArguments naming `field` when the body validator refuses `value`."""
    if not is_valid_body(value):
        raise InvalidArguments(
            f"{field} must be valid UTF-8, at most 1 MiB, with no control characters other "
            "than CR, LF and TAB"
        )


def longest_line(raw: bytes) -> int:
    """Return the length of the longest CRLF-delimited line."""
    return max(map(len, raw.split(b"\r\n")))


def normalize_newlines(value: str) -> str:
    """Turn CRLF and then every lone CR into LF."""
    return value.replace("\r\n", "\n").replace("\r", "\n")


def check_subject(value: str, field: str = "message.subject") -> None:
    """Require a subject of at most 512 UTF-8 bytes with no control characters (no CR/LF)."""
    size = utf8_length(value)
    if size is None or has_control(value):
        raise InvalidArguments(
            f"{field} must be valid UTF-8 without control characters (no CR or LF)"
        )
    if size > limits.MAX_SUBJECT_BYTES:
        raise InvalidArguments(f"{field} must be at most {limits.MAX_SUBJECT_BYTES} bytes")


def is_dot_atom(value: str) -> bool:
    """Tell whether `value` is an RFC 5322 dot-atom (atext runs joined by single dots)."""
    return bool(value) and all(_ATEXT.fullmatch(part) for part in value.split("."))


def is_domain_literal(value: str) -> bool:
    """Tell whether `value` is a domain literal `[...]` of printable ASCII without [ ] or \\."""
    return _DOMAIN_LITERAL.fullmatch(value) is not None and len(value) > 2


def normalize_message_id(value: str) -> str | None:
    """Validate one Message-ID (bare or bracketed) and return it bracketed, case preserved."""
    if not is_header_text(value):
        return None
    inner = value.strip()
    if inner.startswith("<") and inner.endswith(">") and len(inner) >= 2:
        inner = inner[1:-1]
    if not inner or not inner.isascii() or len(inner) + 2 > limits.MAX_MESSAGE_ID_BYTES:
        return None
    if any(ch in inner for ch in " \t<>"):
        return None
    left, at, right = inner.partition("@")
    if not at or not is_dot_atom(left):
        return None
    if not (is_dot_atom(right) or is_domain_literal(right)):
        return None
    return f"<{inner}>"


def clean_source_subject(value: str) -> str:
    """Clean a decoded source subject: controls become spaces, whitespace collapses, trimmed."""
    text = _SURROGATE.sub("\ufffd", value)
    text = _CONTROL.sub(" ", text)
    return " ".join(text.split())


def reply_subject(source_subject: str) -> str:
    """Derive `Re: <rest>` after stripping every leading `re:` (any case) of a cleaned subject."""
    rest = _LEADING_RE.sub("", clean_source_subject(source_subject), count=1).strip()
    return f"Re: {rest}" if rest else "Re:"


def forward_subject(source_subject: str) -> str:
    """Derive `Fwd: <rest>` after stripping every leading `fwd:`/`fw:` (any case)."""
    rest = _LEADING_FWD.sub("", clean_source_subject(source_subject), count=1).strip()
    return f"Fwd: {rest}" if rest else "Fwd:"


_HTML_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&#39;", '"': "&#34;"}


def escape_html(value: str) -> str:
    """Escape exactly & < > ' " the way the original does (&#39; and &#34; for the quotes)."""
    return "".join(_HTML_ESCAPES.get(ch, ch) for ch in value)
