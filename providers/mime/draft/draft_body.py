"""Strict body shapes of the structured-draft subset.

Supported: text/plain, text/html, multipart/alternative (plain then HTML), or multipart/mixed
whose first part is one of those followed by 1-20 attachments. Everything else is refused.
"""

from __future__ import annotations

import binascii
import re

from msgspec import Struct, field, structs

from providers.mime.base64_decoding import decode_strict
from providers.mime.compose import limits
from providers.mime.compose.text_rules import is_valid_body, normalize_newlines
from providers.mime.draft.draft_headers import PART_FIELDS, DraftUnsupported, Fields, header_block
from providers.mime.media_types import MediaType, parse_disposition, parse_media_type
from providers.mime.read.multipart import split_multipart
from providers.mime.read.transfer import IDENTITY_ENCODINGS

MAX_BOUNDARY_CHARS = 70
_BOUNDARY = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]*[0-9A-Za-z'()+_,\-./:=?]")
_ENCODINGS = IDENTITY_ENCODINGS | {"base64", "quoted-printable"}
_BAD_QP = re.compile(rb"=(?!\r\n|[0-9A-Fa-f]{2})")
_TEXT_CHARSETS = frozenset({"utf-8", "us-ascii"})
_MAX_PARTS = limits.MAX_ATTACHMENTS + 1  # one body and the attachments


class DraftFile(Struct, frozen=True):
    """One attachment of a draft: its filename, re-serialized media type and exact bytes."""

    filename: str
    content_type: str
    data: bytes


class DraftBody(Struct, kw_only=True):
    """The bodies and files of a draft; `has_plain` tells a plain part exists (even empty)."""

    text: str = ""
    html: str = ""
    has_plain: bool = False
    attachments: list[DraftFile] = field(default_factory=list)


class _Entity(Struct, frozen=True):
    """One MIME entity: its content fields and where its encoded body lies in the raw bytes."""

    media: MediaType
    encoding: str
    disposition: str | None
    start: int
    end: int


def parse_body(raw: bytes, fields: Fields, start: int, end: int) -> DraftBody:
    """Read the top-level body raw[start:end] whose content fields are `fields`."""
    top = _entity(fields, start, end)
    if top.disposition is not None:
        raise DraftUnsupported("the message itself must not carry a Content-Disposition")
    body = DraftBody()
    if top.media.essence == "multipart/mixed":
        parts = _children(raw, top)
        if not 2 <= len(parts) <= limits.MAX_ATTACHMENTS + 1:
            raise DraftUnsupported("multipart/mixed must hold one body and 1-20 attachments")
        _read_bodies(raw, parts[0], body)
        body.attachments = [_attachment(raw, part) for part in parts[1:]]
        total = sum(len(file.data) for file in body.attachments)
        if total > limits.MAX_ATTACHMENT_TOTAL_BYTES:
            raise DraftUnsupported("attachments exceed 3 MiB decoded in total")
    else:
        if not top.media.essence.startswith("multipart/") and raw.endswith(b"\r\n", start, end):
            # The message's own final CRLF ends its last line; it is not part of the body.
            top = structs.replace(top, end=end - 2)
        _read_bodies(raw, top, body)
    return body


def _entity(fields: Fields, start: int, end: int) -> _Entity:
    value = fields.get("content-type", "text/plain")
    try:
        media = parse_media_type(value, strict=True)
    except ValueError:
        raise DraftUnsupported("a Content-Type cannot be parsed") from None
    encoding = fields.get("content-transfer-encoding")
    token = "" if encoding is None else encoding.lower()
    if token not in _ENCODINGS or (encoding is not None and not token):
        raise DraftUnsupported("a Content-Transfer-Encoding is not one of the supported ones")
    return _Entity(media, token, fields.get("content-disposition"), start, end)


def _part(raw: bytes, start: int, end: int) -> _Entity:
    fields, body_start = header_block(raw, start, end, PART_FIELDS)
    return _entity(fields, body_start, end)


def _read_bodies(raw: bytes, entity: _Entity, body: DraftBody) -> None:
    """Read a text/plain, text/html or multipart/alternative (plain, HTML) body into `body`."""
    essence = entity.media.essence
    if essence == "multipart/alternative":
        parts = _children(raw, entity)
        kinds = [part.media.essence for part in parts]
        if kinds != ["text/plain", "text/html"]:
            raise DraftUnsupported(
                "multipart/alternative must be exactly text/plain then text/html"
            )
        body.text = _text(raw, parts[0])
        body.html = _html(raw, parts[1])
        body.has_plain = True
    elif essence == "text/plain":
        body.text = _text(raw, entity)
        body.has_plain = True
    elif essence == "text/html":
        body.html = _html(raw, entity)
    else:
        raise DraftUnsupported(
            "the body must be text/plain, text/html, multipart/alternative or multipart/mixed"
        )


def _children(raw: bytes, container: _Entity) -> list[_Entity]:
    """Split a multipart container exactly: no preamble, CRLF delimiters, no epilogue."""
    params = container.media.params
    if set(params) != {"boundary"}:
        raise DraftUnsupported("a multipart Content-Type must carry exactly one boundary")
    boundary = params["boundary"]
    if len(boundary) > MAX_BOUNDARY_CHARS or _BOUNDARY.fullmatch(boundary) is None:
        raise DraftUnsupported("a multipart boundary must be 1-70 valid characters")
    if container.encoding not in IDENTITY_ENCODINGS:
        raise DraftUnsupported("a multipart container must not be transfer-encoded")
    if container.disposition is not None:
        raise DraftUnsupported("a multipart container must not carry a Content-Disposition")
    start, end = container.start, container.end
    split = split_multipart(raw, start, end, boundary.encode("ascii"), _MAX_PARTS + 1, strict=True)
    if not split.found or split.preamble:
        raise DraftUnsupported("a multipart body must start with its boundary line (no preamble)")
    if not split.exact:
        raise DraftUnsupported("a boundary line must be exactly the delimiter and CRLF")
    if len(split.parts) > _MAX_PARTS:
        raise DraftUnsupported("a multipart body holds more than 21 parts")
    if not split.closed:
        raise DraftUnsupported("a multipart body lacks its closing boundary")
    if split.epilogue:
        raise DraftUnsupported("a multipart body has an epilogue after its closing line")
    return [_part(raw, start, end) for start, end in split.parts]


def _decoded(raw: bytes, entity: _Entity) -> bytes:
    data = raw[entity.start : entity.end]
    if entity.encoding == "base64":
        try:  # lines end with CRLF; no other byte outside the alphabet is allowed
            return decode_strict(data.replace(b"\r\n", b""))
        except ValueError:
            raise DraftUnsupported("a base64 part is not strict base64") from None
    if entity.encoding == "quoted-printable":
        if _BAD_QP.search(data):
            raise DraftUnsupported("a quoted-printable part has a malformed = escape")
        return binascii.a2b_qp(data)
    if entity.encoding in ("", "7bit") and not data.isascii():
        raise DraftUnsupported("a 7bit part holds non-ASCII bytes")
    return data


def _text(raw: bytes, entity: _Entity) -> str:
    if entity.disposition is not None:
        raise DraftUnsupported("a body part must not carry a Content-Disposition")
    params = entity.media.params
    charset = params.get("charset", "us-ascii").lower()
    if set(params) - {"charset"} or charset not in _TEXT_CHARSETS:
        raise DraftUnsupported("a body part may only declare charset utf-8 or us-ascii")
    data = _decoded(raw, entity)
    if len(data) > limits.MAX_BODY_BYTES:
        raise DraftUnsupported("a body part exceeds 1 MiB decoded")
    if charset == "us-ascii" and not data.isascii():
        raise DraftUnsupported("a us-ascii body part holds non-ASCII bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DraftUnsupported("a body part is not valid UTF-8") from None
    if not is_valid_body(text):
        raise DraftUnsupported("a body part holds control characters")
    return normalize_newlines(text)


def _html(raw: bytes, entity: _Entity) -> str:
    html = _text(raw, entity)
    if not html:
        raise DraftUnsupported("an empty HTML part cannot be represented")
    return html


def _attachment(raw: bytes, entity: _Entity) -> DraftFile:
    if entity.media.essence.startswith("multipart/"):
        raise DraftUnsupported("an attachment must not be a multipart entity")
    if entity.disposition is None:
        raise DraftUnsupported("every part after the body must be an attachment")
    try:
        disposition = parse_disposition(entity.disposition, strict=True)
    except ValueError:
        raise DraftUnsupported("a Content-Disposition cannot be parsed") from None
    filename = disposition.params.get("filename", "")
    if disposition.kind != "attachment":
        raise DraftUnsupported("inline parts are not supported; only attachments")
    if set(disposition.params) != {"filename"} or not filename:
        raise DraftUnsupported("an attachment disposition must carry exactly one filename")
    return DraftFile(filename, entity.media.format(), _decoded(raw, entity))
