"""Human approval inside mail_send_confirmed, before the claim: ask, check the answer, record it.

The ledger enforces the rule (a preparation that requires approval cannot be claimed without an
`approved` event); this module only obtains that event from a person. It shows stored data
alone, approves only an exact accept of the request it recorded, and refuses everything else
without consuming the preparation.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
from typing import Any, Final

import structlog
from msgspec import UNSET, Struct, UnsetType

from ledger.dispatch.refusals import fold_or_refuse
from ledger.dispatch.writes import Run, RunWriter
from ledger.ids import new_id
from ledger.lifecycle import awaits_approval
from ledger.store.answers import Head
from ledger.store.ledger_store import LedgerStore, head_of
from schemas import errors
from schemas.args.prepare import SendConfirmed
from schemas.ledger import LedgerEntry, LedgerUnavailable, decode_event, decode_unclaimed
from schemas.ledger_events import (
    ApprovalRefusal,
    ApprovalRefused,
    ApprovalRequested,
    Approved,
    ConfirmRefused,
    EventData,
)
from schemas.send_policy import ApprovalMode, RequiredApproval, accepts
from service.approval.channel import Answer, Channel, client_text
from service.approval.links import approval_url
from service.approval.text import envelope_lines, expiry_text, shown_digest
from service.context import AppContext
from service.principal import Principal

log = structlog.get_logger("angelos.approval")
HEADER: Final = "Send this message? Nothing is sent unless you choose send."
SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "title": "Send this message?", "enum": ["send", "cancel"]}
    },
    "required": ["decision"],
}
APPROVE: Final = {"decision": "send"}
WAIT_S: Final = 300.0  # a person's time to answer, outside the tool deadline
STATE_TTL_MS: Final = 600_000  # an answer must come within this of its recorded request


class AskApproval(Struct, frozen=True, kw_only=True):
    """2026-07-28: ask the person through the client, then take the answer on the retried call."""

    message: str
    state: str  # plaintext; the SDK's request-state boundary seals it and binds the caller
    url: str | None = None  # URL mode (the passkey page); form mode otherwise


class _Pending(Struct, frozen=True, kw_only=True):
    """A preparation waiting for approval, with the exact text a person is shown."""

    pid: str
    required: RequiredApproval
    entries: list[LedgerEntry]
    head: Head
    writes: RunWriter  # the dispatcher's: its best-effort notes
    # The approval notes of the stream by position: questions asked and answers refused.
    notes: list[tuple[int, EventData]]
    now_ms: int
    message: str
    shown: str
    expires: str


async def approve(
    app: AppContext, principal: Principal, args: SendConfirmed, channel: Channel
) -> AskApproval | None:
    """Obtain the approval the preparation requires, or raise; None: confirm again.

    Called once the dispatcher found the preparation waiting for approval. Anything changed
    since (approved meanwhile, consumed, expired) is left to the dispatcher's second look.
    """
    store, dispatcher = app.sending.store, app.sending.dispatcher
    if dispatcher is None or store is None:
        return None
    pending = await _pending(store, dispatcher.writes, principal, args)
    if pending is None:
        return None
    url = approval_url(app, pending.pid, pending.required)
    by_form = accepts(pending.required, "elicitation") and channel.form
    if channel.stateless_era:
        if channel.state is not None:
            await _take_answer(app, store, pending, channel)
            return None
        if by_form:
            return await _request(app, store, pending, "elicitation", None)
        if url is not None and channel.url:
            return await _request(app, store, pending, "passkey", url)
    elif by_form and channel.ask is not None:
        await _ask_now(app, store, pending, channel)
        return None
    raise _unavailable(url)


async def _pending(
    store: LedgerStore, writes: RunWriter, principal: Principal, args: SendConfirmed
) -> _Pending | None:
    """The preparation if it waits for approval; refused as the claim would refuse it."""
    try:
        now_ms, entries = await store.read(args.prepared_id)
    except LedgerUnavailable:
        raise errors.ServiceUnavailable(
            "the send ledger store did not answer; nothing was asked, claimed or sent"
        ) from None
    # Another owner's, another grant's, a wrong digest, an expired one: the same refusal (and
    # note) the dispatcher gives, before anyone is asked.
    run = Run(args.prepared_id, principal.owner, args.confirmed_digest, args.append_sent,
              principal.grant)  # fmt: skip
    lifecycle = fold_or_refuse(run, now_ms, entries, writes)
    if not awaits_approval(lifecycle):
        return None  # needs no approval, has one, or was consumed: the dispatcher decides
    prepared = lifecycle.prepared
    assert prepared is not None and not isinstance(prepared.approval, UnsetType)
    # fold_or_refuse verified the chain; only the approval notes are decoded again.
    notes = [
        (position, decode_event(entry.e).data)
        for position, entry in enumerate(entries)
        if entry.t in (ApprovalRequested.TYPE, ApprovalRefused.TYPE)
    ]
    try:
        blob = await store.payload(args.prepared_id)
    except LedgerUnavailable:
        raise errors.ServiceUnavailable(
            "the send ledger store did not answer; nothing was asked, claimed or sent"
        ) from None
    if blob is None:
        return None  # the claim answers that the payload is missing
    payload = decode_unclaimed(blob, args.prepared_id, prepared)  # shown only if it is the one
    lines = [HEADER, *envelope_lines(payload)]
    head = head_of(entries)
    assert head is not None  # fold_or_refuse refused an empty stream
    return _Pending(
        pid=args.prepared_id, required=prepared.approval, entries=entries,
        head=head, writes=writes,
        notes=notes, now_ms=now_ms, message="\n".join(lines), shown=shown_digest(lines),
        expires=expiry_text(prepared.expires_ms),
    )  # fmt: skip


async def _request(
    app: AppContext, store: LedgerStore, pending: _Pending, mode: ApprovalMode, url: str | None
) -> AskApproval:
    nonce = secrets.token_hex(16)
    requested = ApprovalRequested(mode=mode, shown_sha256=pending.shown, nonce_sha256=_hash(nonce))
    await _write(app, store, pending, requested, "the approval request could not be recorded")
    state = json.dumps({"pid": pending.pid, "nonce": nonce, "mode": mode})
    return AskApproval(message=pending.message, state=state, url=url)


async def _take_answer(
    app: AppContext, store: LedgerStore, pending: _Pending, channel: Channel
) -> None:
    assert channel.state is not None
    mode, nonce_sha256, problem = _check_state(pending, channel.state)
    if problem is not None:
        await _refuse(pending, mode, problem, nonce_sha256)
    if mode == "passkey":
        # URL mode: the page itself records the approval, and this preparation still has none.
        if channel.answer is None or channel.answer[0] != "accept":
            await _refuse(pending, mode, _refusal(channel.answer), nonce_sha256)
        missing = ConfirmRefused(reason="approval_missing")
        await pending.writes.annotate(pending.pid, pending.head, missing)
        raise errors.ApprovalUnavailable(
            "the approval page has not recorded an approval of this preparation; approve it "
            "there and confirm again; nothing was sent"
        )
    await _judge(app, store, pending, channel, channel.answer, nonce_sha256)


async def _ask_now(
    app: AppContext, store: LedgerStore, pending: _Pending, channel: Channel
) -> None:
    assert channel.ask is not None
    nonce_sha256 = _hash(secrets.token_hex(16))  # for the audit: this answer comes on this call
    requested = ApprovalRequested(
        mode="elicitation", shown_sha256=pending.shown, nonce_sha256=nonce_sha256
    )
    await _write(app, store, pending, requested, "the approval request could not be recorded")
    try:
        answer = await asyncio.wait_for(channel.ask(pending.message, SCHEMA), WAIT_S)
    except TimeoutError:
        await _refuse(pending, "elicitation", "timed_out", nonce_sha256)
    except Exception as exc:  # the client could not be asked: nothing was approved
        log.warning("approval_not_asked", error_type=type(exc).__name__)
        raise _unavailable(None) from None
    await _judge(app, store, pending, channel, answer, nonce_sha256)


async def _judge(
    app: AppContext, store: LedgerStore, pending: _Pending, channel: Channel,
    answer: Answer | None, nonce_sha256: str | None,
) -> None:  # fmt: skip
    if answer is None or answer[0] != "accept" or answer[1] != APPROVE:
        await _refuse(pending, "elicitation", _refusal(answer), nonce_sha256)
    approved = Approved(
        mode="elicitation",
        client_name=client_text(channel.client_name),
        client_version=client_text(channel.client_version),
        protocol=channel.protocol if _is_protocol(channel.protocol) else "",
        shown_sha256=pending.shown,
    )
    await _write(app, store, pending, approved, "the approval could not be recorded")


def _check_state(
    pending: _Pending, state: str
) -> tuple[ApprovalMode, str | None, ApprovalRefusal | None]:
    """Match a returned state to the newest approval request of this preparation.

    Returns the mode, the nonce hash the state names (None when it names none) and the problem.
    """
    try:
        value = json.loads(state)
        pid, nonce, mode = value["pid"], value["nonce"], value["mode"]
    except (ValueError, TypeError, KeyError):
        return "elicitation", None, "state_invalid"
    if mode not in ("elicitation", "passkey") or pid != pending.pid or not isinstance(nonce, str):
        return "elicitation", None, "state_invalid"
    wanted = _hash(nonce)
    requests = [
        (position, data) for position, data in pending.notes if isinstance(data, ApprovalRequested)
    ]
    if not requests:
        return mode, wanted, "state_invalid"
    position, newest = requests[-1]
    if newest.nonce_sha256 != wanted or newest.mode != mode:
        known = any(data.nonce_sha256 == wanted for _, data in requests)
        return mode, wanted, "state_replayed" if known else "state_invalid"
    answered = (
        isinstance(data, ApprovalRefused) and data.nonce_sha256 == wanted
        for later, data in pending.notes
        if later > position
    )
    if any(answered):
        return mode, wanted, "state_replayed"  # this request was already answered
    if pending.now_ms - pending.entries[position].srv_ms > STATE_TTL_MS:
        return mode, wanted, "state_expired"
    if newest.shown_sha256 != pending.shown:
        return mode, wanted, "state_invalid"
    return mode, wanted, None


def _refusal(answer: Answer | None) -> ApprovalRefusal:
    if answer is None:
        return "malformed_answer"
    if answer[0] == "decline" or (answer[0] == "accept" and answer[1] == {"decision": "cancel"}):
        return "declined"
    if answer[0] == "cancel":
        return "cancelled"
    return "malformed_answer"


async def _refuse(
    pending: _Pending, mode: ApprovalMode, reason: ApprovalRefusal, nonce_sha256: str | None
) -> None:
    """Record the refusal (best effort) and answer it; the preparation stays usable."""
    refused = ApprovalRefused(
        mode=mode, reason=reason, nonce_sha256=UNSET if nonce_sha256 is None else nonce_sha256
    )
    await pending.writes.annotate(pending.pid, pending.head, refused)
    raise errors.ApprovalDeclined(
        f"not approved ({reason.replace('_', ' ')}); nothing was sent, and the preparation stays "
        f"usable until {pending.expires}"
    )


async def _write(
    app: AppContext, store: LedgerStore, pending: _Pending, data: EventData, failure: str
) -> None:
    try:
        outcome = await store.append(
            pending.pid, pending.head, data, actor=f"api:{app.instance_id}", eid=new_id()
        )
    except errors.MailError:
        outcome = None
    if outcome is None or outcome.result not in ("appended", "duplicate"):
        if isinstance(data, Approved) and outcome is not None and outcome.state != "PREPARED":
            return  # approved (or consumed) meanwhile: the dispatcher claims or replays it
        if outcome is not None and outcome.result == "annotation_cap":
            # The stream's room for notes is used up by earlier questions and answers.
            raise errors.ApprovalUnavailable(
                "this preparation was asked about too often to ask again; prepare the message "
                "again if it is still wanted; nothing was sent"
            )
        raise errors.ApprovalUnavailable(f"{failure}; nothing was sent")


def _unavailable(url: str | None) -> errors.ApprovalUnavailable:
    where = (
        f"approve it on the passkey page {url} and confirm again"
        if url is not None
        else "use a client that supports elicitation"
    )
    return errors.ApprovalUnavailable(
        f"this send needs a person's approval, which this connection cannot ask for: {where}; "
        "nothing was sent"
    )


def _hash(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


def _is_protocol(value: str) -> bool:
    return re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value, re.ASCII) is not None
