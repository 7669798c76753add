"""The send side of one server process: ledger store, self-check, lease and dispatcher."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import structlog

from ledger.dispatch.pipeline import Dispatcher
from ledger.dispatch.writes import DispatchSettings
from ledger.ids import new_id
from ledger.store.connection import connect
from ledger.store.embedded import EmbeddedError, EmbeddedRedis, start_embedded
from ledger.store.lease import Lease
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from ledger.store.selfcheck import SelfCheckOptions, self_check
from providers.mailbox import Mailbox
from providers.smtp import SmtpPool, SmtpSettings, validate_submission
from schemas import errors
from schemas.ledger import SelfCheckReport
from schemas.ledger_events import SentFilingFailed, SentFilingSucceeded
from schemas.submission import Envelope
from service.config import Config, MailConfig, StoreConfig

log = structlog.get_logger("angelos.sending")


@dataclass
class Sending:
    """What the send tools need; `reason` says why sending is disabled when it is."""

    store: LedgerStore | None = None
    report: SelfCheckReport | None = None
    dispatcher: Dispatcher | None = None
    embedded: EmbeddedRedis | None = None
    reason: str = "no durable send store is configured"

    @property
    def usable(self) -> bool:
        """Tell whether preparations and dispatches may use the store."""
        return self.dispatcher is not None

    async def aclose(self) -> None:
        """Let running dispatches finish, release the lease, then close the store."""
        if self.dispatcher is not None:
            await self.dispatcher.drain(self.dispatcher.settings.tool_deadline_s)
            await self.dispatcher.lease.stop()
            await self.dispatcher.submitter.aclose()
        if self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.client.aclose()
        if self.embedded is not None:
            await self.embedded.stop()


def ledger_settings(store: StoreConfig) -> LedgerSettings:
    """Map the configured ledger variables onto the store's settings."""
    return LedgerSettings(
        namespace=store.namespace,
        retention_ms=store.retention_s * 1000,
        annotation_cap=store.annotation_cap,
        recovery_grace_ms=store.recovery_grace_s * 1000,
        prepare_ttl_ms=store.test_prepare_ttl_ms or 900_000,
        hmac_key=store.hmac_key,
    )


def dispatch_settings(store: StoreConfig, report: SelfCheckReport) -> DispatchSettings:
    """Map the configured timings and the store's durability mode onto the pipeline."""
    return DispatchSettings(
        tool_deadline_s=store.tool_deadline_s,
        dispatch_deadline_s=store.dispatch_deadline_s,
        termination_timeout_s=store.smtp_data_termination_timeout_s,
        outcome_persist_window_s=store.outcome_persist_window_s,
        sent_filing_timeout_s=store.sent_filing_timeout_s,
        waitaof=report.waitaof,
        waitaof_replicas=store.waitaof_replicas,
        fsync_timeout_ms=store.fsync_timeout_ms,
        fault_point=store.fault_point or "",
    )


def smtp_settings(mail: MailConfig, store: StoreConfig) -> SmtpSettings:
    """Build the submission settings from the mailbox configuration."""
    assert mail.password is not None
    return SmtpSettings(
        host=mail.smtp_host,
        port=mail.smtp_port,
        tls_mode=mail.smtp_tls_mode,
        username=mail.username,
        password=mail.password,
        ca_file=mail.tls_ca_file,
        allow_private_hosts=mail.allow_private_hosts,
        timeout_s=mail.timeout_s,
        termination_timeout_s=store.smtp_data_termination_timeout_s,
    )


class MailboxSentFiler:
    """Files Sent copies through the mailbox; every failure becomes a recorded outcome."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox

    async def file_sent(self, raw: bytes) -> SentFilingSucceeded | SentFilingFailed:
        """APPEND once; never retried, whatever happens."""
        try:
            landed = await self.mailbox.append_sent(raw)
        except errors.UnsupportedOperation:
            return SentFilingFailed(outcome="not_applied", reason="no_unique_sent_folder")
        except errors.OutcomeUnknown:
            return SentFilingFailed(outcome="unknown", reason="connection_lost")
        except errors.MailError:
            return SentFilingFailed(outcome="rejected", reason="imap_rejected")
        if landed.uid:
            return SentFilingSucceeded(
                destination_known=True, uid_validity=landed.uid_validity, uid=landed.uid
            )
        return SentFilingSucceeded(destination_known=False)


async def open_store(store: StoreConfig) -> tuple[LedgerStore, EmbeddedRedis | None]:
    """Connect to the configured Redis, or start the embedded one."""
    embedded = None
    if store.mode == "embedded":
        embedded = await start_embedded(store.data_dir)
        client = embedded.client
    else:
        assert store.url is not None
        client = connect(store.url.reveal())
    return LedgerStore(client, ledger_settings(store)), embedded


async def start_sending(config: Config, mailbox: Mailbox | None) -> Sending:
    """Open the store, run its startup self-check, and arm the dispatcher when all is well."""
    store_config = config.store
    if store_config is None or store_config.mode == "off":
        return Sending(reason="no durable send store is configured")
    try:
        store, embedded = await open_store(store_config)
    except EmbeddedError as exc:
        log.warning("send disabled: the embedded store did not start")
        return Sending(reason=f"the embedded ledger store did not start: {exc}")
    options = SelfCheckOptions(
        provider_managed=store_config.fsync_provider_managed,
        assume_noeviction=store_config.assume_noeviction,
        waitaof_replicas=store_config.waitaof_replicas,
        fsync_timeout_ms=store_config.fsync_timeout_ms,
    )
    report = await self_check(store.client, options, store=store)
    sending = Sending(store=store, report=report, embedded=embedded, reason=report.reason)
    if not report.usable:
        log.warning("send disabled: durable store configuration is incomplete")
        return sending
    mail = config.mail
    if mail is None or mail.password is None or mailbox is None:
        sending.reason = "the mailbox is not configured"
        return sending
    lease = Lease(store, store_config.dispatcher_lease_ms, store_config.dispatcher_lease_refresh_ms)
    await lease.start()
    sender = mail.from_addr

    def validate(envelope: Envelope, raw: bytes) -> None:
        validate_submission(envelope, raw, sender)

    sending.dispatcher = Dispatcher(
        store=store,
        lease=lease,
        submitter=SmtpPool(smtp_settings(mail, store_config), mail.smtp_max_connections),
        validate=validate,
        filer=MailboxSentFiler(mailbox),
        settings=dispatch_settings(store_config, report),
        instance_id=new_id(),
    )
    sending.reason = ""
    return sending
