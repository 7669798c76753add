"""mail_query read, read_many and attachment: exact, bounded reads that never set \\Seen."""

from __future__ import annotations

import base64

import msgspec
from msgspec import UNSET

from providers.imap.summaries import rfc3339
from providers.mailbox import Mailbox, RawMessage, RawReader
from providers.mime.read.attachments import extract_attachment
from providers.mime.read.parse import parse_message
from providers.off_loop import cpu_bound, off_loop
from schemas import errors
from schemas.args.query import Attachment, Read, ReadMany
from schemas.error_object import build_error
from schemas.mailbox import Reference
from schemas.messages import ParsedMessage
from schemas.read import (
    FULL_TEXT_HINT,
    SUMMARY_TEXT_BYTES,
    AttachmentResult,
    FullMessage,
    ReadManyItem,
    ReadManyResult,
    SummaryRead,
)
from service.context import AppContext
from service.operations.query import require_mailbox
from service.principal import Principal

DEFAULT_BUDGET = 65_536
RESERVED_SLACK = 128
ADMITTED_LIMIT = 1_048_576


async def parse(raw: RawMessage) -> ParsedMessage:
    """Parse a fetched message, off the event loop unless it is small (HTML is costly)."""
    return await cpu_bound(len(raw.raw), parse_message, raw.raw, rfc822_size=raw.size_bytes)


def full_message(raw: RawMessage, parsed: ParsedMessage) -> FullMessage:
    """Combine the IMAP metadata and the parsed MIME into the full read shape."""
    moment = parsed.date or raw.internal_date
    if moment is None:
        raise errors.ServiceUnavailable("the message has neither a Date nor an INTERNALDATE")
    return FullMessage(
        reference=raw.reference,
        subject=parsed.subject,
        from_=parsed.from_,
        to=parsed.to,
        date=rfc3339(moment),
        flags=raw.flags,
        size_bytes=raw.size_bytes,
        modseq=raw.modseq,
        headers=parsed.headers,
        text=parsed.text,
        attachments=parsed.attachments,
        truncated=parsed.truncated or not raw.complete,
        warnings=parsed.warnings,
    )


def clip_utf8(text: str, limit: int) -> tuple[str, int]:
    """Cut text at the largest UTF-8 character boundary within limit; return it and the size."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, len(data)
    return data[:limit].decode("utf-8", errors="ignore"), len(data)


def summary_read(full: FullMessage) -> SummaryRead:
    """Present a full read compactly: text clipped at 4096 bytes, with a pointer to detail full."""
    text, size = clip_utf8(full.text, SUMMARY_TEXT_BYTES)
    clipped = size > SUMMARY_TEXT_BYTES
    return SummaryRead(
        reference=full.reference,
        subject=full.subject,
        from_=full.from_,
        to=full.to,
        date=full.date,
        flags=full.flags,
        size_bytes=full.size_bytes,
        modseq=full.modseq,
        headers=full.headers,
        text=text,
        text_clipped=clipped,
        text_bytes=size if clipped else 0,
        full_text_hint=FULL_TEXT_HINT if clipped else "",
        attachments=full.attachments,
        truncated=full.truncated,
        warnings=full.warnings,
    )


def graph_mailbox(app: AppContext) -> bool:
    """Tell whether the configured mailbox is Microsoft Graph (its references are Graph's)."""
    return app.config.mail is not None and app.config.mail.provider == "microsoft"


def fit_reference(reference: Reference, graph: bool) -> Reference:
    """Refuse a reference of the other kind than the mailbox's, before any mailbox access."""
    if reference.is_graph and not graph:
        raise errors.InvalidArguments("a Microsoft Graph reference does not fit this IMAP mailbox")
    if graph and not reference.is_graph:
        raise errors.InvalidArguments(
            "this mailbox is Microsoft Graph: pass back a reference it returned, whole"
        )
    return reference


async def read_full(reader: RawReader | Mailbox, reference: Reference, graph: bool) -> FullMessage:
    """Read and parse one message."""
    raw = await reader.read_raw(fit_reference(reference, graph))
    return full_message(raw, await parse(raw))


async def read(app: AppContext, principal: Principal, args: Read) -> SummaryRead | FullMessage:
    """Read one message in summary (default) or full detail."""
    full = await read_full(require_mailbox(app), args.reference, graph_mailbox(app))
    return full if args.detail == "full" else summary_read(full)


async def read_many(app: AppContext, principal: Principal, args: ReadMany) -> ReadManyResult:
    """Read 1-10 references in order under a JSON byte budget; stop visibly, never drop."""
    budget = args.max_response_bytes or DEFAULT_BUDGET
    result = ReadManyResult(
        items=[ReadManyItem(reference=ref, status="not_read") for ref in args.references],
        max_response_bytes=budget,
        response_bytes=0,
        admitted_message_bytes=0,
        next_index=0,
        stop_reason="message_limit",
    )
    if encoded_size(result) + RESERVED_SLACK > budget:
        raise errors.InvalidArguments(
            "read_many: the references alone exceed max_response_bytes; split the batch or "
            "raise the budget"
        )
    result.next_index = UNSET
    result.stop_reason = UNSET
    async with require_mailbox(app).reader(args.references) as reader:
        return await read_batch(reader, args, result, budget, graph_mailbox(app))


async def read_batch(
    reader: RawReader, args: ReadMany, result: ReadManyResult, budget: int, graph: bool
) -> ReadManyResult:
    """Read the references in order on one connection, stopping at the first limit."""
    for index, ref in enumerate(args.references):
        try:
            full = await read_full(reader, ref, graph)
        except errors.MailError as exc:
            error = build_error(exc.code, exc.message, read_only=True)
            result.items[index] = ReadManyItem(reference=ref, status="error", error=error)
        else:
            size = len(msgspec.json.encode(full))
            if size > ADMITTED_LIMIT - result.admitted_message_bytes:
                return stop(result, index, "message_limit")
            result.admitted_message_bytes += size
            message = full if args.detail == "full" else summary_read(full)
            result.items[index] = ReadManyItem(reference=ref, status="ok", message=message)
        if encoded_size(result) + RESERVED_SLACK > budget:
            return stop(result, index, "response_limit")
    return finish(result)


def stop(result: ReadManyResult, index: int, reason: str) -> ReadManyResult:
    """Stop the batch at index: that item is not returned and the rest stay unread."""
    item = result.items[index]
    if item.status == "ok":
        result.admitted_message_bytes -= len(msgspec.json.encode(item.message))
    result.items[index] = ReadManyItem(reference=item.reference, status="not_returned")
    result.next_index = index
    result.stop_reason = "response_limit" if reason == "response_limit" else "message_limit"
    return finish(result)


def finish(result: ReadManyResult) -> ReadManyResult:
    """Set response_bytes to the exact size of the serialized result, itself included."""
    size = 0
    while True:  # the digit count of the field may change the size it reports
        result.response_bytes = size
        measured = encoded_size(result)
        if measured == size:
            return result
        size = measured


def encoded_size(result: ReadManyResult) -> int:
    """Measure the compact JSON bytes we emit for a result."""
    return len(msgspec.json.encode(result))


async def attachment(app: AppContext, principal: Principal, args: Attachment) -> AttachmentResult:
    """Return one attachment's exact transfer-decoded bytes as base64 (at most 2 MiB)."""
    raw = await require_mailbox(app).read_raw(fit_reference(args.reference, graph_mailbox(app)))
    meta, data = await off_loop(extract_attachment, raw.raw, args.index, rfc822_size=raw.size_bytes)
    return AttachmentResult(
        reference=args.reference,
        attachment=meta,
        data_base64=base64.b64encode(data).decode("ascii"),
    )
