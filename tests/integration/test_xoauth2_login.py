"""XOAUTH2 logins against the real rig: a Gmail-shaped Dovecot and an XOAUTH2 SMTP sink.

Both servers check the bearer JWT themselves (signature with the run's key, issuer, `sub`,
`exp`); the tokens come from tests/support/xoauth2_tokens.py, handed to the clients by a
`TokenSource` that records what was asked for and what was invalidated.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Literal

import aioimaplib
import msgspec
import pytest

from providers.imap import codec
from providers.imap.connect import connect, token_refused
from providers.imap.discovery import list_folders, special_folders
from providers.imap.pool import ImapPool
from providers.imap.settings import ImapSettings
from providers.netsafety import clear_reroutes_for_tests, reroute_for_tests
from providers.oauth2.source import TokenSource
from providers.smtp import SmtpSettings, SmtpSubmitter
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from schemas.submission import Envelope, FinalReply, MaybeSent, NotSent
from support.rig_mailbox import SENT_MAIL, copies_in
from support.rig_mailbox import rig_imap as rig_session
from support.services import Services, XOAuth2Rig
from support.smtp_sink import Transaction, transactions, wait_for_transactions
from support.xoauth2_tokens import NOT_A_JWT, GivenTokens, RigMinter, cached, fresh

pytestmark = pytest.mark.services


# Each way a token is refused, and what the Dovecot log says about it.
REFUSALS: dict[str, tuple[Callable[[RigMinter], str], str]] = {
    "expired": (RigMinter.expired, "Token has expired"),
    "wrong sub": (RigMinter.wrong_sub, "did not match"),
    "not a JWT": (lambda _: NOT_A_JWT, "Not a JWT token"),
    "wrong issuer": (RigMinter.wrong_issuer, "is not allowed"),
    "foreign key": (RigMinter.foreign_key, "Bad signature"),
}


@pytest.fixture
def minter(rig: XOAuth2Rig) -> RigMinter:
    return RigMinter(rig)


def imap_settings(
    services: Services, rig: XOAuth2Rig, tokens: TokenSource, **changes: object
) -> ImapSettings:
    """XOAUTH2 settings for the Gmail-shaped Dovecot; the password is left empty."""
    base = ImapSettings(
        host="localhost",
        port=rig.imap_port,
        username=rig.user,
        password=Secret(""),
        ca_file=str(services.ca_file),
        allow_private_hosts=True,
        timeout_s=10.0,
        tokens=tokens,
    )
    return msgspec.structs.replace(base, **changes)


def smtp_settings(
    services: Services, rig: XOAuth2Rig, tokens: TokenSource, tls_mode: str = "tls"
) -> SmtpSettings:
    """XOAUTH2 settings for the rig's SMTP sink, on its implicit-TLS or its STARTTLS port."""
    return SmtpSettings(
        host="localhost",
        port=rig.smtp_port if tls_mode == "tls" else rig.smtp_starttls_port,
        tls_mode="tls" if tls_mode == "tls" else "starttls",
        username=rig.user,
        password=Secret(""),
        ca_file=str(services.ca_file),
        allow_private_hosts=True,
        timeout_s=10.0,
        tokens=tokens,
    )


def log_count(log: Path, needle: str) -> int:
    """How many lines of a Dovecot log hold `needle`."""
    with open(log, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if needle in line)


async def wait_for_log_count(log: Path, needle: str, at_least: int) -> int:
    """Poll the log (Dovecot writes it asynchronously) until `needle` shows `at_least` times."""
    deadline = time.monotonic() + 5
    while True:
        count = log_count(log, needle)
        if count >= at_least or time.monotonic() > deadline:
            return count
        await asyncio.sleep(0.02)


def xoauth2_logins(rig: XOAuth2Rig) -> int:
    return log_count(rig.dovecot_log, f"Login: user=<{rig.user}>, method=XOAUTH2")


@pytest.fixture
async def rig_imap(services: Services, rig: XOAuth2Rig) -> AsyncIterator[aioimaplib.IMAP4_SSL]:
    """An independent IMAP client on the Gmail-shaped mailbox, logged in with the rig password."""
    async with rig_session(services, rig) as imap:
        yield imap


def message(sender: str, rcpt: str) -> tuple[bytes, str]:
    """A small message and its Message-ID."""
    message_id = f"<{uuid.uuid4().hex}@example.test>"
    raw = (
        f"From: Carol <{sender}>\r\nTo: {rcpt}\r\nSubject: xoauth2 test\r\n"
        f"Message-ID: {message_id}\r\n\r\nSent with an access token.\r\n"
    ).encode()
    return raw, message_id


def fresh_domain() -> str:
    """A recipient domain unique to one test, so its spool lines are easy to find."""
    return f"x{uuid.uuid4().hex[:12]}.example.test"


async def lost_reply(
    services: Services, rig: XOAuth2Rig, minter: RigMinter, local_part: str
) -> tuple[bytes, str, Transaction]:
    """Submit to `local_part@<fresh domain>`, whose reply the sink never sends: the message,
    its Message-ID and the sink's transaction line."""
    rcpt = f"{local_part}@{fresh_domain()}"
    raw, message_id = message(rig.user, rcpt)
    submitter = SmtpSubmitter(smtp_settings(services, rig, GivenTokens(fresh(minter.valid(), 1))))
    submission = await submitter.begin(Envelope(rig.user, (rcpt,)), raw)
    with pytest.raises(MaybeSent):
        await submission.commit()
    [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [rcpt], spool=rig.smtp_spool)
    return raw, message_id, line


def spool_lines(rig: XOAuth2Rig, domain: str) -> list[Transaction]:
    return [
        t for t in transactions(rig.smtp_spool) if any(r.endswith("@" + domain) for r in t.rcpt_tos)
    ]


class TestImapLogin:
    async def test_a_valid_token_logs_in_and_opens_the_inbox(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        tokens = GivenTokens(fresh(minter.valid(), 1))
        session = await connect(imap_settings(services, rig, tokens))
        try:
            inbox = await session.examine("INBOX")
        finally:
            await session.logout()
        assert 2 == inbox.exists  # fixtures/gmail: 01-offsite-plan and 03-starred-question
        assert "X-GM-EXT-1" in session.capabilities
        assert (1, []) == (tokens.requests, tokens.invalidated)

    async def test_the_mailbox_is_shaped_like_gmail(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        session = await connect(imap_settings(services, rig, GivenTokens(fresh(minter.valid(), 1))))
        try:
            special = special_folders(await list_folders(session))
            placed = {}
            for folder in ("INBOX", "Work", "[Gmail]/All Mail", "Receipts"):
                await session.examine(folder)
                found = await session.uid_search(
                    codec.atom("HEADER"), codec.quote("X-Fixture"), codec.quote("gmail-01")
                )
                placed[folder] = len(found)
        finally:
            await session.logout()
        assert {
            "all": ["[Gmail]/All Mail"],
            "drafts": ["[Gmail]/Drafts"],
            "flagged": ["[Gmail]/Starred"],
            "junk": ["[Gmail]/Spam"],
            "sent": [SENT_MAIL],
            "trash": ["[Gmail]/Trash"],
        } == special
        # One message, one reference per label it carries.
        assert {"INBOX": 1, "Work": 1, "[Gmail]/All Mail": 1, "Receipts": 0} == placed

    @pytest.mark.parametrize("refusal", sorted(REFUSALS))
    async def test_a_refused_token_fails_at_once_and_is_invalidated(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter, refusal: str
    ) -> None:
        make, reason = REFUSALS[refusal]
        logged = log_count(rig.dovecot_log, reason)
        tokens = GivenTokens(fresh(make(minter), 7))
        with pytest.raises(ServiceUnavailable) as caught:
            await connect(imap_settings(services, rig, tokens))
        # The recovery text, not "did not answer in time": the server's error challenge was
        # answered instead of waited on until the timeout.
        assert token_refused(GivenTokens()) == caught.value.message
        assert (1, [7]) == (tokens.requests, tokens.invalidated)  # a fresh token: no retry
        assert logged + 1 <= await wait_for_log_count(rig.dovecot_log, reason, logged + 1)

    async def test_the_token_reaches_no_log_and_no_error(
        self,
        services: Services,
        rig: XOAuth2Rig,
        minter: RigMinter,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        caplog.set_level(logging.DEBUG)
        good, bad = minter.valid(), minter.expired()
        session = await connect(imap_settings(services, rig, GivenTokens(fresh(good, 1))))
        await session.logout()
        with pytest.raises(ServiceUnavailable) as caught:
            await connect(imap_settings(services, rig, GivenTokens(fresh(bad, 2))))
        for token in (good, bad):
            response = f"user={rig.user}\x01auth=Bearer {token}\x01\x01".encode()
            for secret in (token, base64.b64encode(response).decode()):
                assert secret not in caplog.text
                assert secret not in str(caught.value)
                assert secret not in repr(caught.value)

    async def test_a_refused_cached_token_is_replaced_once_on_a_new_connection(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        logins = xoauth2_logins(rig)
        tokens = GivenTokens(cached(minter.expired(), 1), fresh(minter.valid(), 2))
        session = await connect(imap_settings(services, rig, tokens))
        try:
            inbox = await session.examine("INBOX")
        finally:
            await session.logout()
        assert 2 == inbox.exists
        assert (2, [1]) == (tokens.requests, tokens.invalidated)
        assert logins + 1 == await wait_for_log_count(
            rig.dovecot_log, f"Login: user=<{rig.user}>, method=XOAUTH2", logins + 1
        )

    async def test_a_second_refusal_ends_the_login(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        tokens = GivenTokens(
            cached(minter.expired(), 1), cached(minter.wrong_sub(), 2), fresh(minter.valid(), 3)
        )
        with pytest.raises(ServiceUnavailable) as caught:
            await connect(imap_settings(services, rig, tokens))
        assert token_refused(GivenTokens()) == caught.value.message
        assert (2, [1, 2]) == (tokens.requests, tokens.invalidated)

    async def test_a_server_without_xoauth2_gets_no_token(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        unauthenticated = "no auth attempts"
        before = log_count(services.dovecot_log, unauthenticated)
        tokens = GivenTokens(fresh(minter.valid(), 1))
        settings = imap_settings(
            services, rig, tokens, host=services.imap_host, port=services.imap_port
        )
        with pytest.raises(ServiceUnavailable) as caught:
            await connect(settings)  # the ordinary Dovecot: AUTH=PLAIN and LOGIN only
        assert "the IMAP server does not offer XOAUTH2 login" == caught.value.message
        assert 0 == tokens.requests
        await wait_for_log_count(services.dovecot_log, unauthenticated, before + 1)
        assert 0 == log_count(services.dovecot_log, "XOAUTH2")

    async def test_a_pooled_session_outlives_its_token_and_a_new_one_refreshes(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        lifetime_s = 4
        issued = time.time()
        short = minter.valid(lifetime_s)
        tokens = GivenTokens(fresh(short, 1), cached(short, 1), fresh(minter.valid(), 2))
        settings = imap_settings(services, rig, tokens)
        pool = ImapPool(lambda: connect(settings), size=2)
        try:
            async with pool.session() as session:
                await session.examine("INBOX")
            # Past `exp` (and a second more, Dovecot compares whole seconds) the server refuses
            # `short`.
            await asyncio.sleep(max(0.0, issued + lifetime_s + 1.5 - time.time()))
            async with pool.session() as kept:
                kept_inbox = await kept.examine("INBOX")  # logged in long ago: still fine
                assert (1, []) == (tokens.requests, tokens.invalidated)
                async with pool.session() as opened:  # a new connection, the cached copy first
                    opened_inbox = await opened.examine("INBOX")
        finally:
            await pool.aclose()
        assert session is kept
        assert (2, 2) == (kept_inbox.exists, opened_inbox.exists)
        assert (3, [1]) == (tokens.requests, tokens.invalidated)


class TestSmtpSubmission:
    @pytest.mark.parametrize("tls_mode", ["tls", "starttls"])
    async def test_a_valid_token_submits_and_the_server_files_the_sent_copy(
        self,
        services: Services,
        rig: XOAuth2Rig,
        minter: RigMinter,
        rig_imap: aioimaplib.IMAP4_SSL,
        tls_mode: str,
    ) -> None:
        rcpt = f"ok@{fresh_domain()}"
        raw, message_id = message(rig.user, rcpt)
        tokens = GivenTokens(fresh(minter.valid(), 1))
        submitter = SmtpSubmitter(smtp_settings(services, rig, tokens, tls_mode))
        submission = await submitter.begin(Envelope(rig.user, (rcpt,)), raw)
        assert FinalReply(code=250, enhanced_status="2.0.0") == await submission.commit()
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [rcpt], spool=rig.smtp_spool)
        assert ("accepted", raw) == (line.outcome, line.message())
        assert [raw] == await copies_in(rig_imap, SENT_MAIL, message_id)
        assert (1, []) == (tokens.requests, tokens.invalidated)

    def test_the_endpoint_records_the_xoauth2_login(
        self, services: Services, rig: XOAuth2Rig
    ) -> None:
        with_tokens = smtp_settings(services, rig, GivenTokens())
        with_password = msgspec.structs.replace(with_tokens, tokens=None)
        assert ("xoauth2", "plain") == (with_tokens.endpoint.auth, with_password.endpoint.auth)

    @pytest.mark.parametrize("refusal", ["expired", "not a JWT", "wrong sub"])
    async def test_a_refused_token_is_not_sent_at_authentication(
        self,
        services: Services,
        rig: XOAuth2Rig,
        minter: RigMinter,
        refusal: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        caplog.set_level(logging.DEBUG)
        domain = fresh_domain()
        raw, _ = message(rig.user, f"ok@{domain}")
        token = REFUSALS[refusal][0](minter)
        tokens = GivenTokens(fresh(token, 7))
        submitter = SmtpSubmitter(smtp_settings(services, rig, tokens))
        with pytest.raises(NotSent) as caught:
            await submitter.begin(Envelope(rig.user, (f"ok@{domain}",)), raw)
        failed = caught.value
        assert ("authentication", "auth_failed", 535) == (
            failed.stage,
            failed.reason,
            failed.reply_code,
        )
        assert (1, [7]) == (tokens.requests, tokens.invalidated)
        assert [] == spool_lines(rig, domain)
        assert token not in str(failed) and token not in repr(failed)
        assert token not in caplog.text

    async def test_a_refused_cached_token_is_replaced_once_on_a_fresh_connection(
        self,
        services: Services,
        rig: XOAuth2Rig,
        minter: RigMinter,
        rig_imap: aioimaplib.IMAP4_SSL,
    ) -> None:
        rcpt = f"ok@{fresh_domain()}"
        raw, message_id = message(rig.user, rcpt)
        tokens = GivenTokens(cached(minter.expired(), 1), fresh(minter.valid(), 2))
        submitter = SmtpSubmitter(smtp_settings(services, rig, tokens, "starttls"))
        submission = await submitter.begin(Envelope(rig.user, (rcpt,)), raw)
        assert 250 == (await submission.commit()).code
        assert (2, [1]) == (tokens.requests, tokens.invalidated)
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [rcpt], spool=rig.smtp_spool)
        assert "accepted" == line.outcome
        assert [raw] == await copies_in(rig_imap, SENT_MAIL, message_id)

    async def test_a_second_refusal_is_not_sent(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        domain = fresh_domain()
        raw, _ = message(rig.user, f"ok@{domain}")
        tokens = GivenTokens(
            cached(minter.expired(), 1), cached(minter.expired(), 2), fresh(minter.valid(), 3)
        )
        submitter = SmtpSubmitter(smtp_settings(services, rig, tokens))
        with pytest.raises(NotSent) as caught:
            await submitter.begin(Envelope(rig.user, (f"ok@{domain}",)), raw)
        assert ("authentication", "auth_failed") == (caught.value.stage, caught.value.reason)
        assert (2, [1, 2]) == (tokens.requests, tokens.invalidated)
        assert [] == spool_lines(rig, domain)

    async def test_a_server_without_xoauth2_gets_no_token(
        self, services: Services, rig: XOAuth2Rig, minter: RigMinter
    ) -> None:
        tokens = GivenTokens(fresh(minter.valid(), 1))
        settings = msgspec.structs.replace(
            smtp_settings(services, rig, tokens), port=services.smtp_port
        )  # the ordinary sink: AUTH PLAIN only
        raw, _ = message(rig.user, "ok@example.test")
        with pytest.raises(NotSent) as caught:
            await SmtpSubmitter(settings).begin(Envelope(rig.user, ("ok@example.test",)), raw)
        assert ("authentication", "auth_unavailable") == (caught.value.stage, caught.value.reason)
        assert 0 == tokens.requests

    async def test_drop_files_the_sent_copy_and_leaves_the_outcome_unknown(
        self,
        services: Services,
        rig: XOAuth2Rig,
        minter: RigMinter,
        rig_imap: aioimaplib.IMAP4_SSL,
    ) -> None:
        raw, message_id, line = await lost_reply(services, rig, minter, "drop")
        assert ("dropped", True) == (line.outcome, line.stored)
        assert [raw] == await copies_in(rig_imap, SENT_MAIL, message_id)

    async def test_vanish_leaves_the_outcome_unknown_and_no_copy(
        self,
        services: Services,
        rig: XOAuth2Rig,
        minter: RigMinter,
        rig_imap: aioimaplib.IMAP4_SSL,
    ) -> None:
        # The sink records a transaction after it would have filed a copy, so once the line is
        # there, an absent copy is absent for good.
        _, message_id, line = await lost_reply(services, rig, minter, "vanish")
        assert ("vanished", False) == (line.outcome, line.stored)
        assert [] == await copies_in(rig_imap, SENT_MAIL, message_id)


@pytest.fixture
def pinned(services: Services, rig: XOAuth2Rig) -> Iterator[None]:
    """Send the pinned provider names to the rig (the test CA's certificate names them)."""
    loopback = "127.0.0.1"
    reroute_for_tests(
        {
            ("imap.gmail.com", 993): (loopback, rig.imap_port),
            ("smtp.gmail.com", 465): (loopback, rig.smtp_port),
            ("outlook.office365.com", 993): (loopback, rig.imap_port),
            ("smtp.office365.com", 587): (loopback, rig.smtp_starttls_port),
        },
        str(services.ca_file),
    )
    yield
    clear_reroutes_for_tests()


@pytest.mark.usefixtures("pinned")
class TestPinnedNames:
    @pytest.mark.parametrize("host", ["imap.gmail.com", "outlook.office365.com"])
    async def test_imap_logs_in_at_the_pinned_name(
        self, rig: XOAuth2Rig, minter: RigMinter, host: str
    ) -> None:
        tokens = GivenTokens(fresh(minter.valid(), 1))
        settings = ImapSettings(
            host=host, port=993, username=rig.user, password=Secret(""), tokens=tokens
        )  # no CA file and no private hosts: the test seam alone leads to loopback
        session = await connect(settings)
        try:
            inbox = await session.examine("INBOX")
        finally:
            await session.logout()
        assert 2 == inbox.exists

    @pytest.mark.parametrize(
        ("host", "port", "tls_mode"),
        [("smtp.gmail.com", 465, "tls"), ("smtp.office365.com", 587, "starttls")],
    )
    async def test_smtp_submits_at_the_pinned_name(
        self,
        rig: XOAuth2Rig,
        minter: RigMinter,
        rig_imap: aioimaplib.IMAP4_SSL,
        host: str,
        port: int,
        tls_mode: Literal["tls", "starttls"],
    ) -> None:
        rcpt = f"ok@{fresh_domain()}"
        raw, message_id = message(rig.user, rcpt)
        tokens = GivenTokens(fresh(minter.valid(), 1))
        settings = SmtpSettings(
            host=host,
            port=port,
            tls_mode=tls_mode,
            username=rig.user,
            password=Secret(""),
            tokens=tokens,
        )
        submission = await SmtpSubmitter(settings).begin(Envelope(rig.user, (rcpt,)), raw)
        assert 250 == (await submission.commit()).code
        assert [raw] == await copies_in(rig_imap, SENT_MAIL, message_id)
