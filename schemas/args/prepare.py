"""Inputs of mail_prepare, plus the two direct-argument tools (delete, send)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from schemas import rules
from schemas.args.common import Message, Ref
from schemas.args.create import SourceDigest

QuoteOriginal = Annotated[bool, Meta(description="default true; omit for eml/none")]
# Any case: a well-formed digest that is not the prepared one (another digit, or upper case)
# is the ledger's generic refusal (docs/acceptance/sending.md row 20), not a shape error.
CONFIRMED_DIGEST = "^[0-9a-fA-F]{64}$"


class _Prepare(Struct, tag_field="action", forbid_unknown_fields=True):
    """Common base of mail_prepare actions."""


class PrepareNew(_Prepare, tag="new"):
    """Prepare a new message."""

    message: Message


class PrepareReply(_Prepare, tag="reply"):
    """Prepare a reply to the source's author."""

    reference: Ref
    message: Message
    quote_original: QuoteOriginal | UnsetType = UNSET


class PrepareReplyAll(_Prepare, tag="reply_all"):
    """Prepare a reply to the author and every other source recipient."""

    reference: Ref
    message: Message
    quote_original: QuoteOriginal | UnsetType = UNSET


class PrepareForward(_Prepare, tag="forward"):
    """Prepare a forward of the source message."""

    reference: Ref
    message: Message
    quote_original: QuoteOriginal | UnsetType = UNSET
    original_mode: (
        Annotated[
            Literal["", "quoted", "eml", "none"],
            Meta(description="default quoted; eml attaches it minus Bcc; none omits"),
        ]
        | UnsetType
    ) = UNSET
    attachment_indexes: (
        Annotated[
            list[int],
            Meta(description="from read; others omitted except in eml"),
        ]
        | UnsetType
    ) = UNSET

    def __post_init__(self) -> None:
        if self.original_mode in ("eml", "none") and self.quote_original is not UNSET:
            raise ValueError("forward: omit quote_original with original_mode eml or none")
        indexes = self.attachment_indexes
        if isinstance(indexes, list):
            if len(indexes) > 20 or len(set(indexes)) != len(indexes):
                raise ValueError("forward: attachment_indexes are at most 20 unique values")
            if any(not 1 <= i <= 100 for i in indexes):
                raise ValueError("forward: attachment_indexes values must be 1-100")


class PrepareDraft(_Prepare, tag="draft"):
    """Prepare a reviewed saved draft exactly as stored."""

    reference: Ref
    source_digest: SourceDigest

    def __post_init__(self) -> None:
        rules.check_hex(self.source_digest, 64, "source_digest")  # the pattern lets "\n" end it


PREPARE_ACTIONS: tuple[type[_Prepare], ...] = (
    PrepareDraft,
    PrepareForward,
    PrepareNew,
    PrepareReply,
    PrepareReplyAll,
)


class SendConfirmed(Struct, forbid_unknown_fields=True):
    """Dispatch one approved preparation exactly once."""

    prepared_id: Annotated[str, Meta(description="exact, from mail_prepare")]
    confirmed_digest: Annotated[
        str, Meta(pattern=CONFIRMED_DIGEST, description="approved preview's digest")
    ]
    append_sent: Annotated[
        bool,
        Meta(
            description=(
                "false if capabilities say smtp_stores_sent; true files a Sent copy (needs "
                "write scope + gate)"
            )
        ),
    ]

    def __post_init__(self) -> None:
        rules.check_hex(self.prepared_id, 32, "prepared_id")
        rules.check_whole(CONFIRMED_DIGEST, self.confirmed_digest, "confirmed_digest")
