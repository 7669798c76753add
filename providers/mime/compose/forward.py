"""forward: options, selected source attachments, quoted/none/eml bodies, a new thread."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from msgspec import UNSET, Struct, UnsetType

from providers.mime.compose import limits
from providers.mime.compose.attachments import (
    Outgoing,
    check_selection,
    eml_attachment,
    source_attachment,
)
from providers.mime.compose.authored import Authored, read_message
from providers.mime.compose.build import Plan, build
from providers.mime.compose.quoting import forward_html, forward_text
from providers.mime.compose.reply import DATE_WARNING, check_source, quotable_text
from providers.mime.compose.source import read_source_headers
from providers.mime.compose.text_rules import forward_subject
from providers.mime.compose.thread_ids import parse_single_id
from schemas.args.common import Message
from schemas.compose import (
    ComposedMessage,
    FetchedAttachment,
    Identity,
    OriginalMode,
    SourceExtras,
    SourceMessage,
)
from schemas.errors import InvalidArguments, OperationFailed
from schemas.messages import AttachmentMeta

NO_MESSAGE_ID_WARNING = (
    "the source has no valid Message-ID; the forward starts a new thread without a reference to it"
)


_MODES: dict[str, OriginalMode] = {"quoted": "quoted", "eml": "eml", "none": "none"}


class ForwardOptions(Struct, frozen=True):
    """The effective forward options: mode, whether quoting applies, selected indexes."""

    mode: OriginalMode
    quote_original: bool
    attachment_indexes: tuple[int, ...] = ()


def forward_options(
    original_mode: str | UnsetType = UNSET,
    quote_original: bool | UnsetType = UNSET,
    attachment_indexes: Sequence[int] | UnsetType = UNSET,
) -> ForwardOptions:
    """Resolve the forward options; raise InvalidArguments when they clash."""
    mode = _MODES.get(original_mode or "quoted") if isinstance(original_mode, str) else "quoted"
    if mode is None:
        raise InvalidArguments("original_mode must be quoted, eml or none")
    if mode != "quoted" and quote_original is not UNSET:
        raise InvalidArguments("omit quote_original with original_mode eml or none")
    indexes = tuple(attachment_indexes) if attachment_indexes is not UNSET else ()
    if len(indexes) > limits.MAX_ATTACHMENTS or len(set(indexes)) != len(indexes):
        raise InvalidArguments("attachment_indexes may hold at most 20 unique values")
    if any(not 1 <= index <= 100 for index in indexes):
        raise InvalidArguments("attachment_indexes values must be 1-100")
    if mode == "quoted" and quote_original is False:
        return ForwardOptions("none", False, indexes)
    return ForwardOptions(mode, mode == "quoted", indexes)


def precheck_forward(message: Message, options: ForwardOptions) -> Authored:
    """The checks a forward runs before any mailbox access: recipients, counts, 3 MiB total."""
    authored = read_message(message)
    if not (authored.to or authored.cc or authored.bcc):
        raise InvalidArguments("a forward needs recipients: supply message.to, cc or bcc")
    eml = options.mode == "eml"
    if len(authored.attachments) + len(options.attachment_indexes) + eml > limits.MAX_ATTACHMENTS:
        raise InvalidArguments(
            "message.attachments, attachment_indexes and the eml file may total at most 20"
        )
    return authored


def select_source_attachments(
    message: Message, source: SourceMessage, options: ForwardOptions
) -> list[AttachmentMeta]:
    """After reading the source and before fetching: the metadata of each selected attachment."""
    return _selection(read_message(message), source, options)


def _selection(
    authored: Authored, source: SourceMessage, options: ForwardOptions
) -> list[AttachmentMeta]:
    return check_selection(
        source.attachments,
        options.attachment_indexes,
        caller_count=len(authored.attachments),
        caller_bytes=sum(len(f.data) for f in authored.attachments),
        eml=options.mode == "eml",
    )


def compose_forward(
    message: Message,
    source: SourceMessage,
    options: ForwardOptions,
    *,
    identity: Identity,
    prepared_id: str,
    created_at: datetime,
    fetched: Sequence[FetchedAttachment] = (),
) -> ComposedMessage:
    """Compose a forward of `source` to the caller's recipients; it starts a new thread."""
    authored = precheck_forward(message, options)
    check_source(source)
    headers = read_source_headers(source)
    selected = _selection(authored, source, options)
    warnings = [*source.warnings, *headers.warnings]
    parent = parse_single_id(headers.message_id) if headers.message_id is not None else None
    if parent is None:
        warnings.append(NO_MESSAGE_ID_WARNING)
    text, html = authored.text, authored.html
    if options.mode == "quoted":
        body = quotable_text(source)
        if headers.date is None:
            warnings.append(DATE_WARNING)
        text = forward_text(text, headers, body)
        html = forward_html(html, headers, body) if html else ""
    files = [*authored.attachments, *_fetched_files(selected, fetched, warnings)]
    if options.mode == "eml":
        eml = eml_attachment(source.raw, warnings)
        if sum(len(f.data) for f in files) + len(eml.data) > limits.MAX_ATTACHMENT_TOTAL_BYTES:
            raise InvalidArguments(
                "the original message does not fit in the 3 MiB attachment budget; use "
                "original_mode quoted or none"
            )
        files.append(eml)
    chosen = set(options.attachment_indexes)
    plan = Plan(
        to=authored.to or [],
        cc=authored.cc or [],
        bcc=authored.bcc or [],
        subject=authored.subject or forward_subject(headers.subject),
        text=text,
        html=html,
        attachments=files,
        warnings=warnings,
        extras=SourceExtras(
            source=source.reference,
            source_message_id=parent or "",
            quote_original=options.quote_original,
            original_mode=options.mode,
            attachment_indexes=list(options.attachment_indexes),
            included_source_attachments=selected,
            omitted_source_attachments=(
                []
                if options.mode == "eml"
                else [meta for meta in source.attachments if meta.index not in chosen]
            ),
            source_attachments_in_eml=(list(source.attachments) if options.mode == "eml" else None),
        ),
    )
    return build(plan, identity, prepared_id, created_at)


def _fetched_files(
    selected: list[AttachmentMeta], fetched: Sequence[FetchedAttachment], warnings: list[str]
) -> list[Outgoing]:
    by_index = {item.meta.index: item for item in fetched}
    files: list[Outgoing] = []
    for meta in selected:
        item = by_index.get(meta.index)
        if item is None:
            raise OperationFailed(
                f"source attachment {meta.index} could not be re-read; read the message again"
            )
        files.append(source_attachment(meta, item, warnings))
    return files
