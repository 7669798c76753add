"""mail_prepare new, reply, reply_all and forward: compose, store privately, show the preview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from msgspec import UNSET

from ledger.ids import new_id
from ledger.store.ledger_store import LedgerStore
from providers.mime.compose import (
    compose_forward,
    compose_new,
    compose_reply,
    for_microsoft_graph,
    forward_options,
    identity_from_config,
    precheck_forward,
    preview,
    select_source_attachments,
)
from providers.mime.read.attachments import extract_attachment
from providers.off_loop import off_loop
from schemas import errors
from schemas.args.common import Ref
from schemas.args.prepare import PrepareForward, PrepareNew, PrepareReply, PrepareReplyAll
from schemas.compose import (
    ComposedMessage,
    FetchedAttachment,
    Identity,
    PreparePreview,
    SourceMessage,
)
from schemas.ledger import PayloadAttachment, PreparedPayload
from schemas.ledger_events import PrepareAction
from service.approval.links import approval_url
from service.context import AppContext
from service.operations.query import require_mailbox
from service.operations.read import fit_reference, graph_mailbox, parse
from service.principal import Principal

Action = PrepareAction


def identity(app: AppContext) -> Identity:
    """The configured sender and the owner's own addresses (for reply derivation)."""
    mail = app.config.mail
    if mail is None:
        raise errors.ServiceUnavailable("the mailbox is not configured on this server")
    return identity_from_config(mail.from_addr, mail.username, mail.aliases)


def ledger(app: AppContext) -> LedgerStore:
    """Return the ledger store (the pipeline's gate already required a usable one)."""
    store = app.sending.store
    if store is None or not app.sending.usable:
        raise errors.DeploymentDisabled(
            "sending requires explicit server enablement and a durable send store"
        )
    return store


async def prepare_new(app: AppContext, principal: Principal, args: PrepareNew) -> PreparePreview:
    """Compose a new message from the caller's fields and store it for review."""
    pid, created = new_id(), now()
    composed = await off_loop(
        compose_new, args.message, identity=identity(app), prepared_id=pid, created_at=created
    )
    return await store_preparation(app, principal, composed, "new", created)


async def prepare_reply(
    app: AppContext, principal: Principal, args: PrepareReply | PrepareReplyAll
) -> PreparePreview:
    """Compose a reply (or reply_all) to an exact source message and store it for review."""
    who = identity(app)
    source = await read_source(app, args.reference)
    pid, created = new_id(), now()
    composed = await off_loop(
        compose_reply,
        args.message,
        source,
        identity=who,
        prepared_id=pid,
        created_at=created,
        reply_all=isinstance(args, PrepareReplyAll),
        quote_original=args.quote_original if args.quote_original is not UNSET else True,
    )
    action: Action = "reply_all" if isinstance(args, PrepareReplyAll) else "reply"
    return await store_preparation(app, principal, composed, action, created)


async def prepare_forward(
    app: AppContext, principal: Principal, args: PrepareForward
) -> PreparePreview:
    """Compose a forward with the chosen original mode and source files; store it for review."""
    who = identity(app)
    options = forward_options(args.original_mode, args.quote_original, args.attachment_indexes)
    precheck_forward(args.message, options)  # before any mailbox access
    source = await read_source(app, args.reference)
    fetched = [
        FetchedAttachment(meta=meta, data=await attachment_bytes(source, meta.index))
        for meta in select_source_attachments(args.message, source, options)
    ]
    pid, created = new_id(), now()
    composed = await off_loop(
        compose_forward, args.message, source, options, identity=who, prepared_id=pid,
        created_at=created, fetched=fetched,
    )  # fmt: skip
    return await store_preparation(app, principal, composed, "forward", created)


async def read_source(app: AppContext, reference: Ref) -> SourceMessage:
    """Read the exact source message (never setting \\Seen) and describe it for composition."""
    raw = await require_mailbox(app).read_raw(fit_reference(reference, graph_mailbox(app)))
    parsed = await parse(raw)
    return SourceMessage(
        reference=raw.reference,
        raw=raw.raw,
        text=parsed.text,
        truncated=parsed.truncated or not raw.complete,
        attachments=parsed.attachments,
        warnings=parsed.warnings,
    )


async def attachment_bytes(source: SourceMessage, index: int) -> bytes:
    """Extract one selected source attachment's exact bytes."""
    _, data = await off_loop(extract_attachment, source.raw, index, rfc822_size=len(source.raw))
    return data


async def store_preparation(
    app: AppContext, principal: Principal, composed: ComposedMessage, action: Action,
    created: datetime,
) -> PreparePreview:  # fmt: skip
    """Append `prepared` with the private payload; the preview is returned only once stored."""
    store = ledger(app)
    policy = app.config.send_policy
    allowlist = policy.allowlist
    if allowlist is not None:
        refused = allowlist.refused(composed.to, composed.cc, composed.bcc, composed.recipients)
        if refused:  # positions only: the addresses never reach a log or an error
            raise errors.RecipientNotAllowed(
                "not on the recipient allowlist: " + ", ".join(refused) + "; nothing was prepared"
            )
    if graph_mailbox(app):
        composed = await off_loop(for_microsoft_graph, composed)
    created_ms = int(created.timestamp() * 1000)
    expires_ms = created_ms + store.settings.prepare_ttl_ms
    payload = PreparedPayload(
        pid=composed.prepared_id,
        owner=principal.owner,
        transport=composed.transport,
        action=action,
        from_=composed.envelope_from,
        to=tuple(composed.to),
        cc=tuple(composed.cc),
        bcc=tuple(composed.bcc),
        subject=composed.subject,
        text=composed.text,
        html=composed.html,
        attachments=tuple(
            PayloadAttachment(a.filename, a.content_type, a.bytes, a.sha256)
            for a in composed.attachments
        ),
        message_id=composed.message_id,
        created_ms=created_ms,
        expires_ms=expires_ms,
        raw=composed.raw,
        recipients=tuple(composed.recipients),
        warnings=tuple(composed.warnings),
        digest=composed.digest,
        grant=UNSET if principal.grant is None else principal.grant,
        approval=UNSET if policy.required is None else policy.required,
        allowlist_sha256=UNSET if allowlist is None else allowlist.digest,
    )
    outcome = await store.prepare(payload, actor=f"api:{app.instance_id}", eid=new_id())
    if outcome.result not in ("ok", "duplicate"):
        raise errors.OperationFailed("the preparation could not be stored; nothing was prepared")
    expires_at = datetime.fromtimestamp(expires_ms / 1000, UTC)
    result = preview(composed, expires_at)
    result.approval_url = approval_url(app, payload.pid, policy.required) or UNSET
    return result


def now() -> datetime:
    """The creation time of a preparation, whole milliseconds in UTC."""
    moment = datetime.now(UTC)
    return moment - timedelta(microseconds=moment.microsecond % 1000)
