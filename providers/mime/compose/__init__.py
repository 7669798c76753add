"""Message composition for mail_prepare and drafts: pure functions, no clock, no randomness.

The caller supplies the prepared_id (which fixes Message-ID and MIME boundaries) and the
creation time (which fixes the Date header), so the same inputs always give the same bytes.
Caller mistakes raise InvalidArguments; unusable sources raise OperationFailed.
"""

from __future__ import annotations

from providers.mime.compose.authored import Authored, read_message
from providers.mime.compose.forward import (
    ForwardOptions,
    compose_forward,
    forward_options,
    precheck_forward,
    select_source_attachments,
)
from providers.mime.compose.html_plain import derive_plain_text
from providers.mime.compose.new import (
    build_draft_bytes,
    compose_draft,
    compose_new,
    for_microsoft_graph,
    identity_from_config,
)
from providers.mime.compose.preview import draft_preview, expiry, preview, rfc3339
from providers.mime.compose.reply import compose_reply
from providers.mime.compose.text_rules import normalize_message_id
from schemas.digest import approval_digest, digest_document

__all__ = [
    "Authored",
    "ForwardOptions",
    "approval_digest",
    "build_draft_bytes",
    "compose_draft",
    "compose_forward",
    "compose_new",
    "compose_reply",
    "derive_plain_text",
    "digest_document",
    "draft_preview",
    "expiry",
    "for_microsoft_graph",
    "forward_options",
    "identity_from_config",
    "normalize_message_id",
    "precheck_forward",
    "preview",
    "read_message",
    "rfc3339",
    "select_source_attachments",
]
