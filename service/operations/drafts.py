"""The drafts lifecycle: structured read, save, revise by appending, prepare.

A saved draft is never edited in place: a revision is a new APPEND bound to the exact source
bytes the agent reviewed (its `source_digest`), and a preparation freezes a snapshot of it in
the send ledger like any other mail_prepare.
"""

from __future__ import annotations

import hmac
from datetime import datetime

import msgspec
from msgspec import UNSET, Struct, UnsetType, structs

from ledger.ids import new_id
from providers.mailbox import RAW_PREFIX
from providers.mime.compose import (
    build_draft_bytes,
    compose_draft,
    compose_new,
    draft_preview,
    expiry,
)
from providers.mime.draft.draft import ParsedDraft, parse_draft, read_draft, revised_message
from providers.mime.draft.draft import source_digest as digest_of
from providers.mime.draft.draft_headers import DraftUnsupported
from providers.off_loop import off_loop
from schemas import errors, rules
from schemas.args.common import Message
from schemas.args.create import ReviseDraft, SaveDraft
from schemas.args.prepare import PrepareDraft
from schemas.args.query import Draft
from schemas.compose import ComposedMessage, DraftPreparePreview, Identity
from schemas.drafts import (
    DRAFT_READ_WARNINGS,
    DRAFT_SNAPSHOT_NOTICE,
    DRAFT_UID_UNKNOWN,
    REVISION_NOTICE,
    DraftRead,
    DraftRevision,
)
from schemas.mailbox import Reference
from schemas.mutations import MutationResult
from service.context import AppContext
from service.operations.prepare import identity, now, store_preparation
from service.operations.query import require_mailbox
from service.operations.read import fit_reference, graph_mailbox
from service.principal import Principal

MAX_DRAFT_JSON_BYTES = 1_048_576


class SavedDraft(Struct, kw_only=True):
    """A draft as read for editing: the result an agent sees and the parsed content."""

    read: DraftRead
    parsed: ParsedDraft


async def query_draft(app: AppContext, principal: Principal, args: Draft) -> DraftRead:
    """mail_query draft: the editable reconstruction of a saved draft and its source_digest."""
    return (await load_draft(app, args.reference)).read


async def save_draft(app: AppContext, principal: Principal, args: SaveDraft) -> MutationResult:
    """mail_create draft: compose a new draft (recipients optional) and APPEND it with \\Draft."""
    _, raw = await off_loop(draft_bytes, args.message, identity(app), new_id(), now())
    try:
        await off_loop(parse_draft, raw)
    except (DraftUnsupported, errors.SafetyLimit):
        raise errors.InvalidArguments("the draft does not parse back as a message") from None
    folder = args.folder if isinstance(args.folder, str) and args.folder else None
    return await append(app, raw, folder)


async def revise_draft(app: AppContext, principal: Principal, args: ReviseDraft) -> DraftRevision:
    """mail_create revise_draft: APPEND a patched copy of the exact reviewed draft."""
    who = identity(app)
    saved = await verified_draft(app, args.reference, args.source_digest, who.sender)
    message, keep_empty_text = revised_message(saved.parsed, args.changes)
    composed, raw = await off_loop(draft_bytes, message, who, new_id(), now(), keep_empty_text)
    folder = args.folder if isinstance(args.folder, str) and args.folder else args.reference.folder
    try:
        revised = await off_loop(parse_draft, raw)
    except (DraftUnsupported, errors.SafetyLimit):
        raise errors.InvalidArguments(
            "the revised draft would fall outside the supported draft subset"
        ) from None
    placeholder = Reference(folder=folder, uid_validity=rules.UINT32_MAX, uid=rules.UINT32_MAX)
    check_size(draft_result(placeholder, raw, ["\\Draft"], revised), "the revised draft")
    try:
        revision = await append(app, raw, folder, source=args.reference)
    except errors.MailError as exc:
        if isinstance(exc.outcome, MutationResult):  # always: append() attaches one
            exc.outcome = revision_result(exc.outcome, saved, composed.message_id)
        raise
    return revision_result(revision, saved, composed.message_id)


def revision_result(revision: MutationResult, saved: SavedDraft, message_id: str) -> DraftRevision:
    """The revise_draft result (or error outcome): the original is always retained."""
    return DraftRevision(
        revision=revision,
        source_digest=saved.read.source_digest,
        message_id=message_id,
        warnings=[*DRAFT_READ_WARNINGS, REVISION_NOTICE],
    )


async def prepare_draft(
    app: AppContext, principal: Principal, args: PrepareDraft
) -> DraftPreparePreview:
    """mail_prepare draft: freeze the reviewed draft as an outbound preparation in the ledger."""
    who = identity(app)
    saved = await verified_draft(app, args.reference, args.source_digest, who.sender)
    pid, created = new_id(), now()
    composed = await off_loop(
        compose_new,
        saved.parsed.message(),
        identity=who,
        prepared_id=pid,
        created_at=created,
        keep_empty_text=saved.parsed.has_plain,
        warnings=[*DRAFT_READ_WARNINGS, DRAFT_SNAPSHOT_NOTICE],
    )
    digest = saved.read.source_digest
    estimate = draft_preview(
        composed, expiry(created), source_reference=args.reference, source_digest=digest
    )
    check_size(estimate, "the draft preview")
    stored = await store_preparation(app, principal, composed, "draft", created)
    # The stored preview carries the ledger's own expiry; the draft fields come on top.
    return DraftPreparePreview(
        **structs.asdict(stored),
        source_reference=args.reference,
        source_digest=digest,
        in_reply_to=composed.in_reply_to,
        references=list(composed.references),
    )


async def load_draft(app: AppContext, reference: Reference) -> SavedDraft:
    """Read a saved draft completely (PEEK) and reconstruct it; all or error."""
    raw = await require_mailbox(app).read_raw(fit_reference(reference, graph_mailbox(app)))
    size = len(raw.raw)
    if not raw.raw or size != raw.size_bytes or size > RAW_PREFIX:
        raise errors.SafetyLimit("a draft is read only when complete and at most 5 MiB")
    flags = {flag.lower() for flag in raw.flags}
    if "\\deleted" in flags:
        raise errors.InvalidArguments("the message is marked \\Deleted; it is not a usable draft")
    if "\\draft" not in flags:
        raise errors.InvalidArguments("the message must still have the \\Draft flag")
    parsed = await off_loop(read_draft, raw.raw)
    if raw.reference != reference:
        raise errors.ServiceUnavailable("the server returned a different message")
    read = draft_result(reference, raw.raw, raw.flags, parsed)
    check_size(read, "the structured draft")
    return SavedDraft(read=read, parsed=parsed)


async def verified_draft(
    app: AppContext, reference: Reference, expected_digest: str, sender: str
) -> SavedDraft:
    """Load a draft, require the reviewed source_digest and the configured sender as From."""
    saved = await load_draft(app, reference)
    if not hmac.compare_digest(saved.read.source_digest, expected_digest):
        raise errors.DraftConflict()
    if not saved.parsed.sent_by(sender):
        raise errors.UnsupportedOperation(
            "this draft's From is not the configured sender; write a new draft instead"
        )
    return saved


def draft_result(
    reference: Reference, raw: bytes, flags: list[str], parsed: ParsedDraft
) -> DraftRead:
    """The mail_query draft result for parsed draft bytes."""
    return DraftRead(
        reference=reference,
        source_digest=digest_of(raw),
        flags=list(flags),
        from_=parsed.sender_form(),
        message_id=parsed.message_id or UNSET,
        message=parsed.message(),
        warnings=list(DRAFT_READ_WARNINGS),
    )


def check_size(result: Struct, what: str) -> None:
    """Refuse a draft result whose JSON would exceed 1 MiB; no partial content is returned."""
    if len(msgspec.json.encode(result)) > MAX_DRAFT_JSON_BYTES:
        raise errors.SafetyLimit(f"{what} would exceed 1 MiB of JSON")


async def append(
    app: AppContext, raw: bytes, folder: str | None, source: Reference | UnsetType = UNSET
) -> MutationResult:
    """APPEND a draft; a failure carries a MutationResult outcome (`unknown` or `not_applied`)."""
    try:
        where = await require_mailbox(app).append_draft(raw, folder)
    except errors.MailError as exc:
        # The provider marks every failure after the APPEND command was sent.
        sent = exc.outcome if isinstance(exc.outcome, MutationResult) else None
        exc.outcome = MutationResult(source=source, status=sent.status if sent else "not_applied")
        raise
    if where.reference is not None:
        return MutationResult(source=source, destination=where.reference, status="appended")
    if not where.uid:
        return MutationResult(source=source, status="appended", warnings=[DRAFT_UID_UNKNOWN])
    destination = Reference(folder=where.folder, uid_validity=where.uid_validity, uid=where.uid)
    return MutationResult(source=source, destination=destination, status="appended")


def draft_bytes(
    message: Message, who: Identity, draft_id: str, created: datetime, keep_empty_text: bool = False
) -> tuple[ComposedMessage, bytes]:
    """Compose a draft and the bytes to APPEND (pure and CPU-bound: run it off the loop)."""
    composed = compose_draft(
        message, identity=who, draft_id=draft_id, created_at=created,
        keep_empty_text=keep_empty_text,
    )  # fmt: skip
    return composed, build_draft_bytes(composed)
