"""Retrieve one attachment's exact bytes: transfer-decoded only, never charset-converted."""

from __future__ import annotations

from providers.mime.read.transfer import (
    IDENTITY_ENCODINGS,
    TransferDecodeError,
    decode_body,
    decoded_size,
)
from providers.mime.read.walk import RAW_LIMIT, walk
from schemas.errors import InvalidArguments, NotFound, SafetyLimit
from schemas.messages import AttachmentMeta

MAX_ATTACHMENT_BYTES = 2 * 1024 * 1024
MAX_ATTACHMENT_INDEX = 100


def extract_attachment(
    raw: bytes, index: int, *, rfc822_size: int | None
) -> tuple[AttachmentMeta, bytes]:
    """Return the metadata and decoded bytes of the one-based attachment `index`.

    Raises SafetyLimit when the message exceeds 5 MiB, the decoded attachment exceeds 2 MiB
    or a limit cut the walk short before `index`; InvalidArguments for an index outside
    1-100, an unsupported transfer encoding or corrupt data; NotFound past the inventory.
    """
    if not 1 <= index <= MAX_ATTACHMENT_INDEX:
        raise InvalidArguments("attachment index must be between 1 and 100")
    if len(raw) > RAW_LIMIT or (rfc822_size is not None and rfc822_size > len(raw)):
        raise SafetyLimit("the message exceeds the 5 MiB read limit; attachments are unavailable")
    result = walk(raw, stop_after_attachments=index)
    found = result.attachments()
    if len(found) < index:
        if result.hidden_parts:
            raise SafetyLimit(
                "the MIME walk stopped at a safety limit or malformed structure before reaching "
                "this attachment index; the inventory is incomplete"
            )
        raise NotFound(f"attachment index {index} is beyond the message's {len(found)} attachments")
    entity = found[index - 1]
    body = memoryview(raw)[entity.body_start : entity.body_end]
    # Counted before decoding, so an oversize body is never copied.
    if entity.transfer_encoding in IDENTITY_ENCODINGS | {"base64"} and (
        decoded_size(body, entity.transfer_encoding) > MAX_ATTACHMENT_BYTES
    ):
        raise SafetyLimit("the attachment exceeds 2 MiB decoded")
    try:
        data = decode_body(body, entity.transfer_encoding, strict=True)
    except TransferDecodeError:
        raise InvalidArguments(
            "the attachment uses an unsupported transfer encoding or its data is corrupt"
        ) from None
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise SafetyLimit("the attachment exceeds 2 MiB decoded")
    meta = AttachmentMeta(
        index=index,
        filename=entity.filename,
        content_type=entity.content_type,
        size_bytes=len(data),
    )
    return meta, data
