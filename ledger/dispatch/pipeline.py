"""mail_send_confirmed as a ledger pipeline: claim, attempt marker, commit point.

The invariants this module keeps (numbered as in docs/ledger.md): nothing touches the network
before `claimed` and `smtp_attempt_started` are durable (I2, I3); the SMTP terminator is
written only after `smtp_commit_point` is durable (I4); every write is a compare-and-append, so
recovery and a paused dispatcher fence each other (I5); nothing is ever retried on the network.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Literal

import structlog
from msgspec import UNSET

from ledger.dispatch.closer import CloseIntent, Closer
from ledger.dispatch.outcomes import (
    NOT_ATTEMPTED,
    TERMINATOR_WITHHELD,
    OutcomeStatus,
    finish,
    late_note,
    rejected,
    stage_of,
    status_of,
)
from ledger.dispatch.refusals import (
    GENERIC_REFUSAL,
    approval_missing,
    check_recipients,
    fold_or_refuse,
    rate_limited,
)
from ledger.dispatch.submitter import SentFiler, Slot, Submission, Submitter, Validator
from ledger.dispatch.writes import Closed, DispatchSettings, Run, RunWriter
from ledger.ids import new_id
from ledger.lifecycle import UNCLAIMED, Lifecycle, awaits_approval
from ledger.projection import project
from ledger.store.answers import ClaimOutcome, Head
from ledger.store.durability.monitor import StoreMonitor
from ledger.store.lease import Lease
from ledger.store.ledger_store import LedgerStore, head_of
from schemas import errors
from schemas.digest import approval_digest
from schemas.ledger import LedgerEntry, LedgerUnavailable, PreparedPayload, decode_payload
from schemas.ledger_events import (
    Claimed,
    ConfirmRefused,
    DispatchAborted,
    DispatchQueued,
    DuplicateConfirm,
    SentFilingFailed,
    SentFilingStarted,
    SmtpAttemptStarted,
    SmtpCommitPoint,
)
from schemas.send import (
    NOTHING_SENT_WARNING,
    PENDING_WARNING,
    SENT_COPY_WARNING,
    UNCERTAIN_WARNING,
    ReplayResult,
    SendResult,
)
from schemas.send_policy import NO_POLICY, SendPolicy
from schemas.submission import Envelope, NotSent

log = structlog.get_logger("angelos.ledger.dispatch")
INTEGRITY_OUTCOME = {"status": "rejected", "stage": "integrity_validation", "smtp_attempted": False}
CLAIM_TRIES = 3  # re-reads after a conflicting claim (an annotation slipped in, or a rival)
STORE_AWAY = (
    "the send ledger store did not answer; nothing was claimed or sent, so confirming again "
    "once it answers is safe"
)
AbortStage = Literal["validation", "not_attempted"]
AbortReason = Literal["local_validation", "durability_unconfirmed", "attempt_record_failed"]
IntegrityProblem = Literal[
    "digest_mismatch", "id_mismatch", "payload_hash_mismatch", "transport_mismatch",
    "expired_at_dispatch",
]  # fmt: skip
# The named steps where the pipeline awaits its checkpoint (the fault tests stop or kill a real
# server at each one: tests/faults/fault_server.py).
CheckpointName = Literal[
    "after_claim", "while_queued", "after_attempt_started", "mid_body", "after_commit_point",
    "after_terminator", "after_filing_started",
]  # fmt: skip
Checkpoint = Callable[[CheckpointName], Awaitable[None]]


async def pass_checkpoint(point: CheckpointName) -> None:
    """Go on past a named step at once (the checkpoint of every production dispatcher)."""


class Dispatcher:
    """Owns the lease, the running dispatch tasks and the pipeline of one server process."""

    def __init__(
        self,
        store: LedgerStore,
        lease: Lease,
        submitter: Submitter,
        validate: Validator,
        filer: SentFiler | None,
        settings: DispatchSettings,
        instance_id: str,
        *,
        closer: Closer | None = None,
        monitor: StoreMonitor | None = None,
        policy: SendPolicy = NO_POLICY,
    ) -> None:
        self.store = store
        self.policy = policy  # the owner's live send policy (the claim also enforces the rate)
        self.lease = lease
        self.submitter = submitter
        self.validate = validate
        self.filer = filer
        self.settings = settings
        self.closer = closer or Closer(store)
        self.writes = RunWriter(
            store, lease, settings, f"dispatcher:{lease.dispatcher_id}", f"api:{instance_id}",
            closer=self.closer, monitor=monitor,
        )  # fmt: skip
        self._tasks: set[asyncio.Task[SendResult | ReplayResult]] = set()
        # Awaited at each named step; tests replace it to stop or kill the process right there.
        self.checkpoint: Checkpoint = pass_checkpoint

    async def confirm(
        self, pid: str, owner: str, digest: str, append_sent: bool, grant: str | None = None
    ) -> SendResult | ReplayResult:
        """Dispatch once, shielded from the caller: past the tool deadline answer `sending`.

        `grant` is the confirming token's grant binding in first-party mode (None otherwise);
        it must equal the one the preparation was made under.
        """
        run = Run(pid, owner, digest, append_sent, grant)
        task = asyncio.create_task(self._dispatch(run), name=f"dispatch-{pid[:8]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.settings.tool_deadline_s)
        except TimeoutError:
            return SendResult(
                status="sending",
                message_id=run.message_id,
                warnings=[PENDING_WARNING],
                queued=True if run.queued else UNSET,
            )

    async def drain(self, timeout_s: float) -> None:
        """Wait for running dispatches (shutdown); what does not finish is left to recovery."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    # ------------------------------------------------------------------ read and claim

    async def _dispatch(self, run: Run) -> SendResult | ReplayResult:
        blob: bytes | None = None
        for _ in range(CLAIM_TRIES):
            try:
                now, entries = await self.store.read(run.pid)
            except LedgerUnavailable:
                raise errors.ServiceUnavailable(STORE_AWAY) from None
            lifecycle = fold_or_refuse(run, now, entries, self.writes)
            if lifecycle.state not in UNCLAIMED:
                return await self._replay(run, entries, now)
            head = head_of(entries)
            assert head is not None
            blocked = self.writes.blocked()
            if blocked:  # the store is not durable, or went back in time: claim nothing
                raise errors.DeploymentDisabled(f"{blocked}; nothing was sent")
            await check_recipients(self.store, self.policy, lifecycle, run.pid, head, self.writes)
            if awaits_approval(lifecycle):
                raise errors.ApprovalNeeded()  # the claim script would refuse it too
            outcome = await self._claim(run, head)
            if outcome.result == "claimed":
                blob = outcome.payload
                run.head = outcome.head
                run.claim_srv_ms = outcome.srv_ms
                run.claim_confirmed = outcome.confirmed
                break
            if outcome.result in ("conflict", "existing"):
                continue  # re-read: an annotation slipped in, or someone else claimed
            return await self._claim_refused(run, head, outcome)
        if blob is None:
            raise errors.OperationFailed("the claim kept conflicting; nothing was consumed or sent")
        run.started_at = time.monotonic()
        await self.checkpoint("after_claim")
        return await self._after_claim(run, blob, lifecycle)

    async def _claim(self, run: Run, head: Head) -> ClaimOutcome:
        claimed = Claimed(
            dispatcher_id=self.lease.dispatcher_id,
            claim_token=new_id(),
            confirmed_digest=run.digest,
            append_sent=run.append_sent,
            dispatch_deadline_ms=round(self.settings.dispatch_deadline_s * 1000),
            recovery_grace_ms=self.store.settings.recovery_grace_ms,
        )
        eid = new_id()
        try:
            # A reply lost after the claim landed answers `ack_lost` on the store's retry.
            return await self.store.claim(
                run.pid, owner=run.owner, confirmed_digest=run.digest, head=head,
                claimed=claimed, actor=self.writes.actor, eid=eid, grant=run.grant,
                rate=self.policy.rate,
            )  # fmt: skip
        except LedgerUnavailable:
            # The claim may have landed after all: then it is ours, its payload lost with the
            # reply, and it is closed as not attempted once the store answers again.
            aborted = DispatchAborted(
                stage="not_attempted", reason="claim_ack_lost", network_contacted=False
            )
            await self.closer.keep(CloseIntent(
                pid=run.pid, eid=new_id(), actor=self.writes.actor, events=(aborted,),
                claim_eid=eid,
            ))  # fmt: skip
            raise errors.OperationFailed(
                "the send ledger did not answer the claim; nothing was sent. Check send_status "
                "before deciding anything"
            ) from None

    async def _claim_refused(self, run: Run, head: Head, outcome: ClaimOutcome) -> SendResult:
        if outcome.result == "mismatch":
            self.writes.annotate_later(run.pid, head, ConfirmRefused(reason="digest_mismatch"))
        if outcome.result == "expired":
            self.writes.annotate_later(run.pid, head, ConfirmRefused(reason="expired"))
        if outcome.result == "payload_missing":
            log.critical("send_ledger_integrity_alarm", pid=run.pid, problem="payload_missing")
            self.writes.annotate_later(run.pid, head, ConfirmRefused(reason="payload_missing"))
        if outcome.result == "ack_lost" and outcome.head is not None:
            # We own the claim but never received the payload: provably nothing was sent.
            run.head = outcome.head
            await self.writes.close_or_replay(run, DispatchAborted(
                stage="not_attempted", reason="claim_ack_lost", network_contacted=False
            ))  # fmt: skip
            return self._answer(run, "rejected", "not_attempted", NOTHING_SENT_WARNING)
        if outcome.result == "approval_required":
            raise approval_missing(run.pid, head, self.writes)
        if outcome.result == "rate_limited":
            raise rate_limited(run.pid, head, self.writes, outcome.srv_ms)
        if outcome.result == "halted":
            raise errors.DeploymentDisabled(
                "the ledger store went back in time (acknowledged writes were lost); sending is "
                "off until a person acknowledges it; nothing was sent"
            )
        raise errors.OperationFailed(GENERIC_REFUSAL)

    async def _replay(self, run: Run, entries: list[LedgerEntry], now: int) -> ReplayResult:
        status = project(entries, run.owner, now)
        head = head_of(entries)
        assert head is not None
        if status.status in ("sending", "accepted", "rejected", "unknown"):
            self.writes.annotate_later(
                run.pid, head, DuplicateConfirm(observed_status=status.status)
            )
        return ReplayResult(status=status.status, message_id=run.message_id)

    # ------------------------------------------------------------------ after the claim

    async def _after_claim(
        self, run: Run, blob: bytes, lifecycle: Lifecycle
    ) -> SendResult | ReplayResult:
        try:
            if not run.claim_confirmed:  # not on the replicas (or disk) it must reach
                return await self._abort(run, "not_attempted", "durability_unconfirmed")
            payload, problem = self._integrity(run, blob, lifecycle)
            if payload is None:
                await self.writes.close_or_replay(run, DispatchAborted(
                    stage="integrity_validation", reason=problem, network_contacted=False
                ))  # fmt: skip
                raise errors.OperationFailed(
                    "the prepared message failed integrity validation; nothing was sent",
                    outcome=dict(INTEGRITY_OUTCOME),
                )
            envelope = Envelope(mail_from=payload.from_, recipients=payload.recipients)
            try:
                self.validate(envelope, payload.raw)
            except NotSent:
                return await self._abort(run, "validation", "local_validation")
            return await self._submit(run, payload, envelope)
        except Closed:
            now, entries = await self.store.read(run.pid)
            return await self._replay(run, entries, now)

    def _integrity(
        self, run: Run, blob: bytes, lifecycle: Lifecycle
    ) -> tuple[PreparedPayload | None, IntegrityProblem]:
        """Check the claimed payload against the prepared event."""
        prepared = lifecycle.prepared
        assert prepared is not None
        if hashlib.sha256(blob).hexdigest() != prepared.payload_sha256:
            return None, "payload_hash_mismatch"
        try:
            payload = decode_payload(blob)
        except errors.MailError:
            return None, "payload_hash_mismatch"
        if payload.pid != run.pid or payload.message_id != prepared.message_id:
            return None, "id_mismatch"
        if payload.transport != self.submitter.endpoint.transport:
            return None, "transport_mismatch"
        recomputed = approval_digest(
            payload.from_, payload.recipients, payload.raw, transport=payload.transport
        )
        if recomputed != prepared.digest or payload.digest != run.digest:
            return None, "digest_mismatch"
        if run.claim_srv_ms >= prepared.expires_ms:
            return None, "expired_at_dispatch"
        return payload, "digest_mismatch"  # the problem is unused on success

    async def _submit(
        self, run: Run, payload: PreparedPayload, envelope: Envelope
    ) -> SendResult | ReplayResult:
        if self.submitter.busy():
            await self._queue(run)
        async with self.submitter.slot() as slot:
            run.queued = False
            if run.waited:
                # The clocks of the pipeline (claim to attempt, the commit point deadline) start
                # when a queued dispatch gets its connection: waiting must never cost a send.
                run.started_at = time.monotonic()
            return await self._attempt(run, payload, envelope, slot)

    async def _queue(self, run: Run) -> None:
        """Record that the claimed message waits for a connection; nothing is sent meanwhile."""
        note = DispatchQueued(connections=self.submitter.capacity, ahead=self.submitter.waiting)
        await self.writes.note(run, note)
        run.queued = run.waited = True
        await self.checkpoint("while_queued")

    async def _attempt(
        self, run: Run, payload: PreparedPayload, envelope: Envelope, slot: Slot
    ) -> SendResult | ReplayResult:
        elapsed = time.monotonic() - run.started_at
        if elapsed >= self.settings.claim_to_attempt_s or not await self.writes.vouch():
            return await self._abort(run, "not_attempted", "attempt_record_failed")
        endpoint = self.submitter.endpoint
        marker = SmtpAttemptStarted(
            transport=endpoint.transport,
            endpoint=f"{endpoint.host}:{endpoint.port}",
            tls_mode=endpoint.tls_mode,
            auth=endpoint.auth,
        )
        if not await self.writes.gate(run, marker):
            # Not known to be recorded and durable: never connect. Whether or not the marker
            # landed, the closing event says so (the closer reads which state it must fit).
            await self.writes.close_or_replay(run, *NOT_ATTEMPTED)
            return self._answer(run, "rejected", "not_attempted", NOTHING_SENT_WARNING)
        await self.checkpoint("after_attempt_started")
        try:
            submission = await slot.begin(envelope, payload.raw)
        except NotSent as exc:
            await self.writes.close_or_replay(run, rejected(exc))
            return self._answer(run, "rejected", exc.stage)
        await self.checkpoint("mid_body")
        return await self._commit(run, payload, submission)

    async def _commit(
        self, run: Run, payload: PreparedPayload, submission: Submission
    ) -> SendResult | ReplayResult:
        elapsed = time.monotonic() - run.started_at
        room = self.settings.dispatch_deadline_s - self.settings.termination_timeout_s
        point = SmtpCommitPoint(
            wire_bytes=submission.wire_bytes,
            raw_sha256=hashlib.sha256(payload.raw).hexdigest(),
        )
        vouched = elapsed < room and await self.writes.vouch()
        # The witness must hold the commit point's clock before the terminator: a store that
        # later forgets the commit point must not let recovery call the send not submitted.
        if not vouched or not await self.writes.gate(run, point, witnessed=True):
            await submission.abort()
            await self.writes.close_or_replay(run, TERMINATOR_WITHHELD)
            return self._answer(run, "rejected", "data", NOTHING_SENT_WARNING)
        await self.checkpoint("after_commit_point")
        outcome = await finish(submission)
        await self.checkpoint("after_terminator")
        status = status_of(outcome)
        recorded = await self.writes.close(
            run, outcome, late=late_note(outcome), patience_s=self.settings.outcome_persist_window_s
        )
        if recorded == "later":
            # The provider's own words, so this line alone is evidence if the journal is lost.
            log.critical(
                "send_outcome_not_recorded_yet",
                pid=run.pid,
                outcome=status,
                stage=stage_of(outcome),
                reply_code=getattr(outcome, "reply_code", 0),
                enhanced_status=getattr(outcome, "enhanced_status", ""),
                cause=getattr(outcome, "cause", ""),
            )
        if status == "accepted" and run.append_sent and recorded == "now":
            await self._file_sent(run, payload)
        if status == "unknown":
            run.warnings.append(UNCERTAIN_WARNING)
        return self._answer(run, status, stage_of(outcome))

    async def _file_sent(self, run: Run, payload: PreparedPayload) -> None:
        if self.filer is None:
            return
        try:
            started = await self.writes.gate(run, SentFilingStarted(mailbox_role="sent"))
        except Closed:
            return
        if not started:  # perhaps recorded: then its result is owed, and it is this
            await self.writes.close(
                run, SentFilingFailed(outcome="not_applied", reason="store_unavailable")
            )
            run.warnings.append(SENT_COPY_WARNING)
            return
        await self.checkpoint("after_filing_started")
        try:
            result = await asyncio.wait_for(
                self.filer.file_sent(payload.raw), self.settings.sent_filing_timeout_s
            )
        except TimeoutError:
            result = SentFilingFailed(outcome="unknown", reason="timeout")
        await self.writes.close(run, result)
        if isinstance(result, SentFilingFailed):
            run.warnings.append(SENT_COPY_WARNING)

    async def _abort(self, run: Run, stage: AbortStage, reason: AbortReason) -> SendResult:
        await self.writes.close_or_replay(
            run, DispatchAborted(stage=stage, reason=reason, network_contacted=False)
        )
        return self._answer(run, "rejected", stage, NOTHING_SENT_WARNING)

    def _answer(self, run: Run, status: OutcomeStatus, stage: str, *warnings: str) -> SendResult:
        return SendResult(
            status=status,
            stage=stage,
            message_id=run.message_id,
            warnings=[*run.warnings, *warnings],
        )
