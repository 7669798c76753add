"""A bounded MIME walk over raw bytes: entities as offsets, never a copy of a body.

The stdlib feed parser builds the whole tree eagerly (every body as a string, about eight
times the message size at peak), cannot stop at our depth, part and header limits, and
recurses per nesting level. This walk keeps one explicit stack, checks each limit before
doing the work it guards, and records bodies as (start, end) offsets into the caller's bytes.
Content-Type and Content-Disposition are read by the lenient mode of media_types.
"""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct, field

from providers.mime.charsets import loose_text
from providers.mime.cleaning import clean_line
from providers.mime.encoded_words import decode_words
from providers.mime.header_block import FieldFinder, HeaderFields, header_bounds, parse_fields
from providers.mime.media_types import (
    Disposition,
    MediaType,
    format_parameters,
    parse_disposition,
    parse_media_type,
)
from providers.mime.read.multipart import split_multipart
from providers.mime.read.transfer import IDENTITY_ENCODINGS, normalize_encoding
from schemas.errors import SafetyLimit

RAW_LIMIT = 5 * 1024 * 1024
MAX_DEPTH = 12
MAX_PARTS = 100
MAX_CONTENT_TYPE_BYTES = 4096
MAX_FILENAME_BYTES = 1024
# Longer Content-Type/Disposition values are cut before their parameters are read: no real
# one is longer, and it bounds the parameter work of a walk to 100 parts x 4 KiB.
_MAX_PARAM_VALUE_CHARS = 4096
_MAX_BOUNDARY_BYTES = 200

# A part needs only these; the root's fields are all parsed (they are displayed).
_PART_FIELDS = FieldFinder(("Content-Type", "Content-Disposition", "Content-Transfer-Encoding"))


class Problem(StrEnum):
    """Why a walk or a read may be incomplete; the value is the warning's reason."""

    OVERSIZE = "the message is larger than the 5 MiB read limit"
    HEADERS = "the message headers could not be parsed within limits"
    DEPTH = "MIME nesting is deeper than 12 levels"
    PARTS = "the message has more than 100 MIME parts"
    PART_HEADERS = "a MIME part header block exceeds 64 KiB"
    CONTAINER_ENCODING = "a multipart container uses a non-identity transfer encoding"
    MALFORMED = "the MIME structure is malformed"
    MALFORMED_HEADER = "a MIME header block is malformed"
    UNTERMINATED = "a multipart body lacks its closing delimiter"
    CHARSET = "a text part declares an unknown charset"
    ENCODING = "a part uses an unsupported or corrupt transfer encoding"
    TEXT_LIMIT = "the text is longer than 256 KiB and was cut"
    HTML_LIMIT = "the HTML exceeded the extraction limits"

    @property
    def hides_parts(self) -> bool:
        """Tell whether this problem may have hidden parts from the walk."""
        return self in _HIDING


_HIDING = frozenset(
    {
        Problem.OVERSIZE,
        Problem.HEADERS,
        Problem.DEPTH,
        Problem.PARTS,
        Problem.PART_HEADERS,
        Problem.CONTAINER_ENCODING,
        Problem.MALFORMED,
    }
)


class Entity(Struct, frozen=True):
    """One content part in walk order: a leaf, or a multipart kept whole as an attachment."""

    media_type: str
    charset: str | None
    transfer_encoding: str
    body_start: int
    body_end: int
    attachment: bool
    filename: str
    content_type: str


class Walk(Struct):
    """The result of a walk: root header fields (None when unreadable), entities, problems."""

    root: HeaderFields | None = None
    entities: list[Entity] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def note(self, problem: Problem) -> None:
        """Record a problem once."""
        if problem not in self.problems:
            self.problems.append(problem)

    @property
    def hidden_parts(self) -> bool:
        """Tell whether a limit or malformed structure may have hidden parts."""
        return any(problem.hides_parts for problem in self.problems)

    def attachments(self) -> list[Entity]:
        """Return the attachment entities in walk order (index i+1 is entry i)."""
        return [entity for entity in self.entities if entity.attachment]


def walk(raw: bytes, *, stop_after_attachments: int | None = None) -> Walk:
    """Walk the MIME tree of raw[:5 MiB] within the depth, part and header limits.

    `stop_after_attachments` ends the walk once that many attachments were found.
    """
    result = Walk()
    end = min(len(raw), RAW_LIMIT)
    if len(raw) > RAW_LIMIT:
        result.note(Problem.OVERSIZE)
    # (start, end, depth, default media type); popped in walk order.
    stack: list[tuple[int, int, int, str]] = [(0, end, 0, "text/plain")]
    parts = 0
    found = 0
    while stack:
        start, stop, depth, default_type = stack.pop()
        parts += 1
        if parts > MAX_PARTS:
            result.note(Problem.PARTS)
            break
        try:
            bounds = header_bounds(raw, start, stop)
        except SafetyLimit:
            result.note(Problem.HEADERS if depth == 0 else Problem.PART_HEADERS)
            if depth == 0:
                break
            continue
        block = raw[bounds.header_start : bounds.header_end]
        fields = parse_fields(block) if depth == 0 else _PART_FIELDS.first_fields(block)
        if bounds.separator_missing or fields.malformed:
            result.note(Problem.MALFORMED_HEADER)
        if depth == 0:
            result.root = fields
        entity, declared = _entity(fields, default_type, bounds.body_start, stop, result)
        if entity.attachment or not entity.media_type.startswith("multipart/"):
            result.entities.append(entity)
            found += entity.attachment
            if stop_after_attachments is not None and found >= stop_after_attachments:
                break
            continue
        if entity.transfer_encoding not in IDENTITY_ENCODINGS:
            result.note(Problem.CONTAINER_ENCODING)
            continue
        if depth + 1 > MAX_DEPTH:
            result.note(Problem.DEPTH)
            continue
        # One child more than the part budget lets the loop above notice the limit.
        children = _children(raw, entity, declared, MAX_PARTS - parts + 1, result)
        child_type = "message/rfc822" if entity.media_type == "multipart/digest" else "text/plain"
        stack.extend((a, b, depth + 1, child_type) for a, b in reversed(children))
    return result


def _content_fields(fields: HeaderFields) -> tuple[MediaType, Disposition, bool]:
    """Read Content-Type and Content-Disposition leniently; tell whether either value was cut."""
    cut = False
    texts: list[str] = []
    for name in ("Content-Type", "Content-Disposition"):
        value = fields.get(name)
        text = "" if value is None else loose_text(value)
        if len(text) > _MAX_PARAM_VALUE_CHARS:
            text, cut = text[:_MAX_PARAM_VALUE_CHARS], True
        texts.append(text)
    return parse_media_type(texts[0], strict=False), parse_disposition(texts[1], strict=False), cut


def _entity(
    fields: HeaderFields, default_type: str, body_start: int, body_end: int, result: Walk
) -> tuple[Entity, MediaType]:
    """Describe one entity and decide, by the attachment rule, whether it is an attachment."""
    declared, disposition, cut = _content_fields(fields)
    if cut:
        result.note(Problem.MALFORMED)
    explicit = declared.essence != ""
    media_type = declared.essence if explicit else default_type
    raw_encoding = fields.get("Content-Transfer-Encoding")
    encoding = "" if raw_encoding is None else normalize_encoding(loose_text(raw_encoding))
    filename = _filename(declared, disposition)
    attachment = (
        disposition.kind == "attachment"
        or bool(filename)
        or (explicit and not media_type.startswith(("multipart/", "text/")))
    )
    entity = Entity(
        media_type=media_type,
        charset=_charset(declared) if media_type.startswith("text/") else None,
        transfer_encoding=encoding,
        body_start=body_start,
        body_end=body_end,
        attachment=attachment,
        filename=filename,
        content_type=_content_type(declared, media_type) if attachment else media_type,
    )
    return entity, declared


def _charset(declared: MediaType) -> str | None:
    """Return the declared charset in lower case; None when absent or not ASCII."""
    charset = declared.params.get("charset")
    if charset is None or not charset.isascii():
        return None
    return charset.lower()


def _filename(declared: MediaType, disposition: Disposition) -> str:
    """Return the cleaned filename (Content-Disposition filename, else Content-Type name)."""
    params = disposition.params
    name = params["filename"] if "filename" in params else declared.params.get("name")
    if not name or not name.strip():
        return ""
    return clean_line(decode_words(name.strip()), MAX_FILENAME_BYTES)


def _content_type(declared: MediaType, media_type: str) -> str:
    """Re-serialize the media type with its parameters for display (RFC 2231 values decoded)."""
    return clean_line(
        format_parameters(media_type, declared.params, wire=False), MAX_CONTENT_TYPE_BYTES
    )


def _children(
    raw: bytes, entity: Entity, declared: MediaType, room: int, result: Walk
) -> list[tuple[int, int]]:
    """Split a multipart body into at most `room` child (start, end) offsets."""
    boundary = declared.params.get("boundary", "")
    if not boundary or not boundary.isascii() or len(boundary) + 2 > _MAX_BOUNDARY_BYTES:
        result.note(Problem.MALFORMED)
        return []
    stop = entity.body_end
    split = split_multipart(raw, entity.body_start, stop, boundary.encode("ascii"), room)
    if not split.found:
        result.note(Problem.MALFORMED)  # no delimiter at all: the children are unknown
    elif not (split.closed or split.full) and not stop == RAW_LIMIT < len(raw):
        result.note(Problem.UNTERMINATED)  # unless merely cut at 5 MiB
    return split.parts
