"""Read one raw message into a ParsedMessage: safe headers, display text, attachment inventory.

Reads degrade instead of failing: every read limit, malformed MIME, an
unknown charset or transfer encoding sets `truncated` and adds a warning saying why the
content may be partial. Bodies are read through a memoryview of the caller's bytes, so the
only copies are the decoded text parts (bounded by the text budget) and one attachment at a
time while its decoded size is measured.
"""

from __future__ import annotations

from providers.mime.charsets import decode_text
from providers.mime.cleaning import clean_block, cut_utf8
from providers.mime.header_block import HeaderFields
from providers.mime.html_text import MAX_INPUT_BYTES, html_to_text
from providers.mime.read.headers import display_value, message_ids, parse_addresses, parse_date
from providers.mime.read.transfer import TransferDecodeError, decode_body, decoded_size
from providers.mime.read.walk import RAW_LIMIT, Entity, Problem, Walk, walk
from schemas.errors import SafetyLimit
from schemas.messages import SAFE_HEADER_KEYS, AttachmentMeta, ParsedMessage

TEXT_LIMIT = 256 * 1024
HEADER_VALUE_LIMIT = 4096
PARTIAL_WARNING = "the message content may be partial: {reason}"
HTML_WARNING = (
    "the text was extracted from HTML; link destinations shown in it are untrusted and were "
    "not fetched"
)
# Decoded bytes read for a text budget of n bytes: no charset needs more than 4 bytes per
# character, so more input could not add displayed text (control characters aside).
_INPUT_PER_TEXT_BYTE = 4


def parse_message(raw: bytes, *, rfc822_size: int | None = None) -> ParsedMessage:
    """Parse at most the first 5 MiB of `raw`; never raises on malformed input.

    `rfc822_size` is the server's RFC822.SIZE: larger than `raw` means the fetch was cut.
    """
    result = walk(raw)
    if rfc822_size is not None and rfc822_size > len(raw):
        result.note(Problem.OVERSIZE)
    message = ParsedMessage()
    if result.root is not None:
        _read_headers(message, result.root)
    view = memoryview(raw)[: min(len(raw), RAW_LIMIT)]
    _read_text(message, view, result)
    message.attachments = _inventory(view, result)
    message.truncated = bool(result.problems)
    message.warnings = [PARTIAL_WARNING.format(reason=problem) for problem in result.problems]
    if message.html_derived:
        message.warnings.append(HTML_WARNING)
    return message


def _read_headers(message: ParsedMessage, root: HeaderFields) -> None:
    """Fill the safe display headers and the parsed envelope fields (never Bcc)."""
    for key in SAFE_HEADER_KEYS:
        value = root.get(key)
        if value is not None:
            shown = display_value(value, HEADER_VALUE_LIMIT)
            if shown:
                message.headers[key] = shown
    message.subject = message.headers.get("Subject", "")
    message.from_ = parse_addresses(root.get("From") or b"")
    message.to = parse_addresses(root.get("To") or b"")
    message.cc = parse_addresses(root.get("Cc") or b"")
    message.reply_to = parse_addresses(root.get("Reply-To") or b"")
    message.date = parse_date(root.get("Date") or b"")
    try:
        ids = message_ids(root.get("Message-ID") or b"")
    except SafetyLimit:
        ids = []
    message.message_id = ids[0] if ids else ""


def _read_text(message: ParsedMessage, view: memoryview, result: Walk) -> None:
    """Concatenate the text/plain parts, or else the text extracted from the HTML parts."""
    shown = [e for e in result.entities if not e.attachment]
    plain = [e for e in shown if e.media_type == "text/plain"]
    html = [] if plain else [e for e in shown if e.media_type == "text/html"]
    pieces: list[str] = []
    used = 0
    html_input_left = MAX_INPUT_BYTES
    for entity in plain or html:
        room = TEXT_LIMIT - used - (1 if pieces else 0)
        if room <= 0:
            result.note(Problem.TEXT_LIMIT)
            break
        if entity.media_type == "text/html":
            if html_input_left <= 0:
                result.note(Problem.HTML_LIMIT)
                break
            source = _part_text(view, entity, html_input_left, result, Problem.HTML_LIMIT)
            if source is None:
                continue
            extracted = html_to_text(source, max_input_bytes=html_input_left)
            html_input_left -= len(source.encode("utf-8"))
            if extracted.limits_hit:
                result.note(Problem.HTML_LIMIT)
            text = extracted.text
        else:
            decoded = _part_text(
                view, entity, room * _INPUT_PER_TEXT_BYTE, result, Problem.TEXT_LIMIT
            )
            if decoded is None:
                continue
            text = decoded
        size = len(text.encode("utf-8"))
        if size > room:
            text, size = cut_utf8(text, room), room
            result.note(Problem.TEXT_LIMIT)
        pieces.append(text)
        used += size + (1 if len(pieces) > 1 else 0)
    message.text = "\n".join(pieces)
    message.html_derived = bool(html)


def _part_text(
    view: memoryview, entity: Entity, wanted: int, result: Walk, cut_problem: Problem
) -> str | None:
    """Decode one text part to cleaned text from at most `wanted` decoded bytes (None: failed)."""
    body = view[entity.body_start : entity.body_end]
    # Enough encoded input for `wanted` decoded bytes: base64 needs 4 per 3 plus line breaks,
    # quoted-printable up to 3 per byte ("=XX"); identity bodies are cut before any copy.
    if entity.transfer_encoding == "base64":
        body = body[: wanted * 3 // 2 + 1024]
    elif entity.transfer_encoding == "quoted-printable":
        body = body[: wanted * 3 + 1024]
    else:
        body = body[: wanted + 1]
    try:
        data = decode_body(body, entity.transfer_encoding, strict=False)
    except TransferDecodeError:
        result.note(Problem.ENCODING)
        return None
    if len(data) > wanted:
        data = data[:wanted]
        result.note(cut_problem)
    text, known = decode_text(data, entity.charset)
    if not known:
        result.note(Problem.CHARSET)
    return clean_block(text)


def _inventory(view: memoryview, result: Walk) -> list[AttachmentMeta]:
    """List the attachments in walk order with their transfer-decoded sizes."""
    listed: list[AttachmentMeta] = []
    for index, entity in enumerate(result.attachments(), start=1):
        body = view[entity.body_start : entity.body_end]
        try:
            size = decoded_size(body, entity.transfer_encoding)
        except TransferDecodeError:
            result.note(Problem.ENCODING)
            size = len(body)
        listed.append(
            AttachmentMeta(
                index=index,
                filename=entity.filename,
                content_type=entity.content_type,
                size_bytes=size,
            )
        )
    return listed
