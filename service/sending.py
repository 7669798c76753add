"""The send side of one server process: ledger store, self-check, monitor, lease, dispatcher.

Sending is usable only while the store keeps every acknowledged write and has not gone back in
time; the monitor re-reads that on every new connection and every lease refresh, so `usable`
and `reason` are read at call time, never fixed at start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from ledger.dispatch.closer import Closer
from ledger.dispatch.evidence import SentCopyFinder
from ledger.dispatch.journal import Journal
from ledger.dispatch.pipeline import Dispatcher
from ledger.dispatch.submitter import Submitter, Validator
from ledger.dispatch.writes import DispatchSettings
from ledger.ids import new_id
from ledger.store.connection import StoreClient, connect, ready
from ledger.store.durability.acks import Acknowledgment
from ledger.store.durability.monitor import StoreMonitor
from ledger.store.durability.selfcheck import SelfCheckOptions, self_check
from ledger.store.durability.witness import Witness, WitnessError
from ledger.store.embedded import EmbeddedError, EmbeddedRedis, start_embedded
from ledger.store.keys import LedgerKeys
from ledger.store.lease import Lease
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from providers.graph.mailbox import GraphMailbox
from providers.graph.submit import GraphSubmitter, validate_graph_submission
from providers.mailbox import Mailbox
from providers.smtp import SmtpPool, SmtpSettings, validate_submission
from schemas import errors
from schemas.ledger import SelfCheckReport
from schemas.ledger_events import SentFilingFailed, SentFilingSucceeded
from schemas.secret import Secret
from schemas.submission import Envelope
from service.config import Config, MailConfig, StoreConfig
from service.graph_mailbox import AttachedLater, attach_token_store
from service.mail_login import mail_tokens

log = structlog.get_logger("angelos.sending")
# Called with every dispatcher start_sending arms, before it takes its first confirm. Production
# adds none; the fault tests' entry point (tests/faults/fault_server.py) installs its checkpoint.
ON_DISPATCHER: list[Callable[[Dispatcher], None]] = []


@dataclass
class Sending:
    """What the send tools need; `reason` says why sending is disabled when it is."""

    store: LedgerStore | None = None
    report: SelfCheckReport | None = None
    dispatcher: Dispatcher | None = None
    embedded: EmbeddedRedis | None = None
    monitor: StoreMonitor | None = None
    journal: Journal | None = None
    problem: str = "no durable send store is configured"  # what kept the dispatcher from arming
    # What recovery searches for the provider's own copy of an unknown send (None: the provider
    # does not file Sent itself, so recovery never searches).
    sent_copies: SentCopyFinder | None = None

    @property
    def usable(self) -> bool:
        """Tell whether preparations and dispatches may use the store now."""
        return self.dispatcher is not None and not self.reason

    @property
    def reason(self) -> str:
        """Say why sending is off right now ("" when it is on)."""
        if self.problem:
            return self.problem
        return "" if self.monitor is None else self.monitor.blocked

    async def aclose(self) -> None:
        """Let running dispatches finish, release the lease, then close the store."""
        if self.dispatcher is not None:
            await self.dispatcher.drain(self.dispatcher.settings.tool_deadline_s)
            await self.dispatcher.closer.wait_idle(2.0)
            await self.dispatcher.closer.stop()  # what is still owed stays in the journal
            await self.dispatcher.lease.stop()
            await self.dispatcher.submitter.aclose()
        if self.journal is not None:
            self.journal.close()
        if self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.client.aclose()
            if self.store.witness is not None:
                self.store.witness.close()
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
    )


def smtp_settings(mail: MailConfig, store: StoreConfig) -> SmtpSettings:
    """Build the submission settings from the mailbox configuration."""
    return SmtpSettings(
        host=mail.smtp_host,
        port=mail.smtp_port,
        tls_mode=mail.smtp_tls_mode,
        username=mail.username,
        password=mail.password or Secret(""),  # unused with an OAuth login
        tokens=mail_tokens(mail),
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


def sent_copy_finder(mail: MailConfig | None, mailbox: Mailbox | None) -> SentCopyFinder | None:
    """The mailbox, as recovery's search for evidence, where the provider files Sent itself.

    Only such a provider holds a copy of each message it accepted and of no other; elsewhere a
    Sent copy proves nothing, and recovery does not search.
    """
    if mail is None or mailbox is None or not mail.smtp_stores_sent:
        return None
    return mailbox


def transport(
    mail: MailConfig, store: StoreConfig, mailbox: Mailbox
) -> tuple[Submitter, Validator]:
    """The configured transport and its local check: SMTP, or Graph's sendMail."""
    sender = mail.from_addr
    if isinstance(mailbox, GraphMailbox):

        def validate_graph(envelope: Envelope, raw: bytes) -> None:
            validate_graph_submission(envelope, raw, sender)

        limit = min(mail.timeout_s, store.smtp_data_termination_timeout_s)
        return GraphSubmitter(mailbox.http, mailbox.settings, limit), validate_graph

    def validate(envelope: Envelope, raw: bytes) -> None:
        validate_submission(envelope, raw, sender)

    return SmtpPool(smtp_settings(mail, store), mail.smtp_max_connections), validate


def durability_options(store: StoreConfig) -> SelfCheckOptions:
    """The operator's durability assertions and WAITAOF settings."""
    return SelfCheckOptions(
        provider_managed=store.fsync_provider_managed,
        assume_noeviction=store.assume_noeviction,
        waitaof_replicas=store.waitaof_replicas,
        wait_replicas=store.wait_replicas,
        fsync_timeout_ms=store.fsync_timeout_ms,
    )


def acknowledgment(options: SelfCheckOptions, report: SelfCheckReport) -> Acknowledgment:
    """What every ledger write waits for: the configured replicas, and WAITAOF where it works."""
    return Acknowledgment(
        replicas=options.replicas, waitaof=report.waitaof, timeout_ms=options.fsync_timeout_ms
    )


async def open_store(
    store: StoreConfig, monitor: StoreMonitor | None = None
) -> tuple[LedgerStore, EmbeddedRedis | None]:
    """Connect to the configured Redis, or start the embedded one; the monitor (if any) reads
    every new connection before it carries a command."""
    hook = None if monitor is None else monitor.on_connect
    embedded = None
    client: StoreClient
    if store.mode == "embedded":
        embedded = await start_embedded(store.data_dir, on_connect=hook)
        client = embedded.client
    else:
        assert store.url is not None
        # A reply may take as long as WAITAOF's own timeout, where the server has it.
        extra = store.fsync_timeout_ms / 1000
        client = connect(store.url.reveal(), on_connect=hook, extra_timeout_s=extra)
        await ready(client)
    return LedgerStore(client, ledger_settings(store)), embedded


def attach_witness(store: LedgerStore, data_dir: str, store_id: str) -> None:
    """Give the store this host's rollback witness of its ledger (WitnessError if it cannot)."""
    store.witness = Witness.open(data_dir, store.settings.namespace, store_id)


async def start_sending(
    config: Config, mailbox: Mailbox | None, graph_token_store: AttachedLater | None = None
) -> Sending:
    """Open the store, run its startup self-check, and arm the dispatcher when all is well.

    A Microsoft Graph mailbox's token store is attached to the store's Redis as soon as it is
    open (its tokens are needed to read mail even when sending stays off).
    """
    store_config = config.store
    if store_config is None or store_config.mode == "off":
        return Sending(problem="no durable send store is configured")
    options = durability_options(store_config)
    monitor = StoreMonitor(LedgerKeys(store_config.namespace), options.durability)
    try:
        store, embedded = await open_store(store_config, monitor)
    except EmbeddedError as exc:
        log.warning("send disabled: the embedded store did not start")
        return Sending(problem=f"the embedded ledger store did not start: {exc}")
    if graph_token_store is not None and config.mail is not None:
        attach_token_store(graph_token_store, store.client, config.mail)
    report = await self_check(store.client, options, store=store)
    sending = Sending(store=store, report=report, embedded=embedded, problem=report.reason)
    sending.sent_copies = sent_copy_finder(config.mail, mailbox)
    if not report.usable and not report.durability_only:
        log.warning("send disabled: durable store configuration is incomplete")
        return sending
    # Settings that do not hold yet (AOF off, say) keep sending off through the monitor, which
    # re-reads them on every refresh: fixing Redis is enough, no restart is needed.
    monitor.waitaof = report.waitaof
    store.require(acknowledgment(options, report))
    try:
        attach_witness(store, store_config.data_dir, report.store_id)
    except WitnessError as exc:
        log.warning("send disabled: the rollback witness cannot be kept")
        sending.problem = f"{exc} (ANGELOS_DATA_DIR must be a writable directory)"
        return sending
    monitor.witness = store.witness
    sending.monitor = monitor
    await monitor.check(store.client)  # with the witness: a rollback is caught before any claim
    mail = config.mail
    if mail is None or mailbox is None:
        sending.problem = "the mailbox is not configured"
        return sending
    lease = Lease(
        store,
        store_config.dispatcher_lease_ms,
        store_config.dispatcher_lease_refresh_ms,
        monitor,
    )
    await lease.start()
    try:
        sending.journal = Journal.open(
            store_config.data_dir, f"{store_config.namespace}-{report.store_id}",
            lease.dispatcher_id,
        )  # fmt: skip
    except OSError:  # the closer still keeps what it owes in memory
        log.error("send_journal_unavailable")
    closer = Closer(store, sending.journal)
    if sending.journal is not None:
        for intent in await sending.journal.adopt():  # what processes that are gone still owed
            closer.adopt(intent)
    submitter, validate = transport(mail, store_config, mailbox)
    sending.dispatcher = Dispatcher(
        store=store,
        lease=lease,
        submitter=submitter,
        validate=validate,
        filer=MailboxSentFiler(mailbox),
        settings=dispatch_settings(store_config, report),
        instance_id=new_id(),
        closer=closer,
        monitor=monitor,
        policy=config.send_policy,
    )
    for hook in ON_DISPATCHER:
        hook(sending.dispatcher)
    sending.problem = ""
    return sending
