"""MIME assembly: body parts, multipart containers and the final header block, all CRLF."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from providers.mime.compose.attachments import Outgoing
from providers.mime.compose.encoding import base64_lines, fold_header, quoted_printable
from providers.mime.media_types import format_parameters
from schemas.errors import InvalidArguments

CRLF = b"\r\n"


class Part(Struct, frozen=True):
    """One MIME entity: its content header fields in order and its encoded body."""

    headers: list[tuple[str, str]]
    body: bytes


def text_part(subtype: str, text: str) -> Part:
    """A UTF-8 quoted-printable text part."""
    return Part(
        [
            ("Content-Type", f"text/{subtype}; charset=utf-8"),
            ("Content-Transfer-Encoding", "quoted-printable"),
        ],
        quoted_printable(text),
    )


def body_part(text: str, html: str, boundary: str) -> Part:
    """Plain text alone, or multipart/alternative with the plain part first, then HTML."""
    if not html:
        return text_part("plain", text)
    return multipart("alternative", boundary, [text_part("plain", text), text_part("html", html)])


def attachment_part(outgoing: Outgoing, mixed_boundary: str) -> Part:
    """An attachment: base64 in 76-character lines, or a canonical message/rfc822 as 7bit."""
    disposition = format_parameters("attachment", {"filename": outgoing.filename})
    if outgoing.is_rfc822:
        if b"--" + mixed_boundary.encode("ascii") in outgoing.data:
            raise InvalidArguments(
                "an embedded message contains the MIME boundary by chance; prepare again"
            )
        encoding, body = "7bit", outgoing.data
    else:
        encoding, body = "base64", base64_lines(outgoing.data)
    return Part(
        [
            ("Content-Type", outgoing.content_type),
            ("Content-Transfer-Encoding", encoding),
            ("Content-Disposition", disposition),
        ],
        body,
    )


def multipart(subtype: str, boundary: str, parts: Sequence[Part]) -> Part:
    """A multipart container without preamble or epilogue."""
    delimiter = b"--" + boundary.encode("ascii")
    chunks: list[bytes] = []
    for part in parts:
        chunks += [delimiter, CRLF, render_entity(part), CRLF]
    chunks += [delimiter, b"--", CRLF]
    content_type = format_parameters(f"multipart/{subtype}", {"boundary": boundary})
    return Part([("Content-Type", content_type)], b"".join(chunks))


def render_entity(part: Part, leading: Sequence[tuple[str, str]] = ()) -> bytes:
    """Header fields (leading ones first), a blank line, then the body."""
    head = b"".join(fold_header(name, value) for name, value in (*leading, *part.headers))
    return head + CRLF + part.body


def render_message(headers: Sequence[tuple[str, str]], part: Part) -> bytes:
    """The complete message, always ending with CRLF."""
    raw = render_entity(part, headers)
    return raw if raw.endswith(CRLF) else raw + CRLF
