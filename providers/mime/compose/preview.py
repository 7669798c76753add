"""The mail_prepare preview: complete, never shortened."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from providers.mime.compose import limits
from schemas.compose import (
    ComposedMessage,
    DraftPreparePreview,
    PreparePreview,
    SourcedPreparePreview,
)
from schemas.mailbox import Reference


def expiry(created_at: datetime) -> datetime:
    """A preparation's deadline: creation time plus 15 minutes."""
    return created_at + limits.PREPARATION_LIFETIME


def rfc3339(moment: datetime) -> str:
    """Format an aware time as RFC 3339 UTC with whole seconds, e.g. 2026-10-06T18:15:00Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _common(composed: ComposedMessage, expires_at: datetime) -> dict[str, Any]:
    return {
        "prepared_id": composed.prepared_id,
        "digest": composed.digest,
        "from_": composed.envelope_from,
        "to": list(composed.to),
        "cc": list(composed.cc),
        "bcc": list(composed.bcc),
        "subject": composed.subject,
        "text": composed.text,
        "html": composed.html,
        "warnings": list(composed.warnings),
        "attachments": list(composed.attachments),
        "message_id": composed.message_id,
        "expires_at": rfc3339(expires_at),
        "encoded_bytes": len(composed.raw),
    }


def preview(composed: ComposedMessage, expires_at: datetime) -> PreparePreview:
    """The preview of a new message, or of a reply/forward with its source fields."""
    common = _common(composed, expires_at)
    extras = composed.extras
    if extras is None:
        return PreparePreview(**common)
    sourced = SourcedPreparePreview(
        **common,
        source=extras.source,
        source_message_id=extras.source_message_id,
        in_reply_to=composed.in_reply_to,
        references=list(composed.references),
        quote_original=extras.quote_original,
        original_mode=extras.original_mode,
        attachment_indexes=list(extras.attachment_indexes),
        included_source_attachments=list(extras.included_source_attachments),
        omitted_source_attachments=list(extras.omitted_source_attachments),
    )
    if extras.source_attachments_in_eml is not None:
        sourced.source_attachments_in_eml = list(extras.source_attachments_in_eml)
    return sourced


def draft_preview(
    composed: ComposedMessage,
    expires_at: datetime,
    *,
    source_reference: Reference,
    source_digest: str,
) -> DraftPreparePreview:
    """The preview of a prepared saved draft."""
    return DraftPreparePreview(
        **_common(composed, expires_at),
        source_reference=source_reference,
        source_digest=source_digest,
        in_reply_to=composed.in_reply_to,
        references=list(composed.references),
    )
