"""The throwaway peers from scripts/test-services behave as the other tests assume."""

from __future__ import annotations

import asyncio
import dataclasses
import email
import json
import re
import ssl
import subprocess
import sys
import time
import uuid
from collections import Counter
from email.message import EmailMessage
from pathlib import Path

import aiosmtplib
import pytest
import redis.asyncio as aioredis

from support.imap import (
    Append,
    IMAPCommandError,
    append_messages,
    close_session,
    create_folder,
    dovecot_login_count,
    ok,
    open_session,
    quote_mailbox,
    wait_for_login_count,
)
from support.services import Services
from support.smtp_sink import Transaction, transactions, wait_for_transactions

pytestmark = pytest.mark.services

MANIFEST = Path(__file__).resolve().parents[2] / "fixtures" / "mail" / "manifest.json"


def unique_rcpt(local: str) -> str:
    """A recipient whose domain makes its sink transaction easy to find."""
    return f"{local}@t{uuid.uuid4().hex[:10]}.example.test"


def make_message(rcpt: str, body: str = "Hello from the peers test.\n") -> bytes:
    msg = EmailMessage()
    msg["From"] = "alice@example.test"
    msg["To"] = rcpt
    msg["Subject"] = "peers test"
    msg["Message-ID"] = f"<{uuid.uuid4().hex}@example.test>"
    msg.set_content(body)
    return msg.as_bytes(policy=msg.policy.clone(linesep="\r\n"))


async def send(
    services: Services,
    rcpts: list[str],
    message: bytes,
    *,
    password: str | None = None,
    smtp_timeout: float = 10,
) -> tuple[dict[str, aiosmtplib.SMTPResponse], str]:
    return await aiosmtplib.send(
        message,
        sender="alice@example.test",
        recipients=rcpts,
        hostname=services.smtp_host,
        port=services.smtp_port,
        use_tls=True,
        tls_context=services.ssl_context(),
        username=services.username,
        password=services.password if password is None else password,
        timeout=smtp_timeout,
    )


async def plaintext_probe(port: int, line: bytes) -> bytes:
    """What a TLS-only port answers a plaintext client (it should close, not greet)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(line)
        await writer.drain()
        return await asyncio.wait_for(reader.read(100), 5)
    except ConnectionError:
        return b""
    finally:
        writer.close()


def only(found: list[Transaction]) -> Transaction:
    assert len(found) == 1, found
    return found[0]


class TestRedis:
    async def test_durable_and_never_evicts(self, services: Services) -> None:
        """Redis runs with AOF, fsync on every write and noeviction, as the ledger requires."""
        r = aioredis.from_url(services.redis_url, decode_responses=True)
        try:
            info = await r.info("persistence")
            config = await r.config_get("*")
        finally:
            await r.aclose()
        assert info["aof_enabled"] == 1
        assert config["appendfsync"] == "always"
        assert config["maxmemory-policy"] == "noeviction"
        assert config["save"] == ""


class TestIMAPS:
    async def test_handshake_verifies_against_test_ca(self, services: Services) -> None:
        """IMAPS on localhost presents a certificate signed by the per-run CA."""
        reader, writer = await asyncio.open_connection(
            services.imap_host, services.imap_port, ssl=services.ssl_context()
        )
        try:
            greeting = await reader.readline()
        finally:
            writer.close()
        assert greeting.startswith(b"* OK")

    async def test_handshake_fails_without_the_ca(self, services: Services) -> None:
        """Without MAIL_TLS_CA_FILE the certificate is not trusted."""
        with pytest.raises(ssl.SSLCertVerificationError):
            await asyncio.open_connection(
                services.imap_host, services.imap_port, ssl=ssl.create_default_context()
            )

    async def test_plaintext_is_not_served(self, services: Services) -> None:
        """The IMAP port speaks TLS only: a plaintext client gets no IMAP greeting."""
        assert not (await plaintext_probe(services.imap_port, b"a1 CAPABILITY\r\n")).startswith(
            b"* OK"
        )

    async def test_bob_has_his_own_mailbox(self, services: Services) -> None:
        """The second user logs in and sees the special-use folders."""
        imap = await open_session(services, "bob")
        try:
            listing = ok(await imap.list('""', "*"), "LIST")
        finally:
            await close_session(imap)
        lines = b"\n".join(bytes(line) for line in listing.lines)
        for role in (b"\\Drafts", b"\\Sent", b"\\Trash", b"\\Junk", b"\\Archive"):
            assert lines.count(role) == 1, lines

    async def test_append_helper_returns_appenduid(self, services: Services) -> None:
        """append_messages parses UIDVALIDITY and consecutive UIDs from APPENDUID."""
        imap = await open_session(services)
        try:
            folder = await create_folder(imap, "peers")
            result = await append_messages(
                imap,
                folder,
                [
                    make_message("x@example.test"),
                    Append(make_message("y@example.test"), ["\\Seen"]),
                ],
            )
            status = ok(
                await imap.status(quote_mailbox(folder), "(MESSAGES UIDVALIDITY)"), "STATUS"
            )
        finally:
            await close_session(imap)
        assert result.uids == [1, 2]
        assert f"UIDVALIDITY {result.uidvalidity}" in bytes(status.lines[0]).decode()


class TestFixtureCorpus:
    def test_committed_files_match_the_generator(self) -> None:
        """fixtures/mail is exactly what fixtures/mail/generate.py writes (edit the generator)."""
        check = subprocess.run(
            [sys.executable, str(MANIFEST.parent / "generate.py"), "--check"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (check.returncode, check.stderr) == (0, "")

    def test_size_limits_are_exercised(self) -> None:
        """One attachment over 2 MiB in a message under 5 MiB, and one message over 5 MiB."""
        mib = 1024 * 1024
        big = email.message_from_bytes(
            (MANIFEST.parent / "17-attachment-over-2mib.eml").read_bytes()
        )
        attachment = next(p for p in big.walk() if p.get_filename() == "report-full.pdf")
        payload = attachment.get_payload(decode=True)
        assert isinstance(payload, bytes) and len(payload) > 2 * mib
        assert (MANIFEST.parent / "17-attachment-over-2mib.eml").stat().st_size <= 5 * mib
        assert (MANIFEST.parent / "18-attachment-over-5mib-total.eml").stat().st_size > 5 * mib

    async def test_every_manifest_message_is_in_its_folder(self, services: Services) -> None:
        """Each folder holds exactly the manifest's fixtures (found by their X-Fixture header)."""
        manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
        expected: dict[str, set[str]] = {}
        for entry in manifest["messages"]:
            expected.setdefault(entry["folder"], set()).add(entry["file"].removesuffix(".eml"))
        imap = await open_session(services)
        try:
            found: dict[str, set[str]] = {}
            for folder in expected:
                ok(await imap.select(quote_mailbox(folder)), f"SELECT {folder}")
                fetched = ok(
                    await imap.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (X-FIXTURE)])"), "FETCH"
                )
                names = set()
                for line in fetched.lines:
                    m = re.search(rb"X-Fixture: (\S+)", bytes(line))
                    if m:
                        names.add(m[1].decode())
                found[folder] = names
        finally:
            await close_session(imap)
        assert expected == found
        counts = Counter(e["folder"] for e in manifest["messages"])
        assert dict(counts) == {"INBOX": 41, "Archive": 5, "Drafts": 2, "Projets/Café Été 2026": 3}


class TestSMTPSink:
    async def test_plain_recipient_is_stored_and_relayed(self, services: Services) -> None:
        """A normal recipient gets 250; exact bytes are stored and LMTP-relayed to Dovecot."""
        message = make_message("bob@example.test", "relayed to bob\n")
        before = await _bob_inbox_count(services)
        errors, reply = await send(services, ["bob@example.test"], message)
        assert errors == {}
        assert reply.startswith("2.0.0 OK queued")
        t = only(
            [
                t
                for t in transactions(rcpt="bob@example.test")
                if t.stored and t.message() == message
            ]
        )
        assert (t.outcome, t.stored) == ("accepted", True)
        assert message == t.message()
        assert t.data_started_at is not None and t.terminator_at is not None
        assert t.data_started_at <= t.terminator_at
        assert before + 1 == await _bob_inbox_count(services)

    @pytest.mark.parametrize("code", [450, 550])
    async def test_rcpt_steering_refuses_the_recipient(self, services: Services, code: int) -> None:
        """rcpt-NNN@ is refused with NNN at RCPT and logged without a terminator."""
        rcpt = unique_rcpt(f"rcpt-{code}")
        with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as caught:
            await send(services, [rcpt], make_message(rcpt))
        assert [code] == [e.code for e in caught.value.recipients]
        t = only(transactions(rcpt=rcpt))
        assert (f"rcpt-{code}", None, False) == (t.outcome, t.terminator_at, t.stored)

    @pytest.mark.parametrize("code", [451, 554])
    async def test_data_steering_rejects_after_the_dot(self, services: Services, code: int) -> None:
        """data-NNN@ accepts RCPT and answers NNN to the final dot; nothing is stored."""
        rcpt = unique_rcpt(f"Data-{code}")  # steering ignores case
        with pytest.raises(aiosmtplib.SMTPDataError) as caught:
            await send(services, [rcpt], make_message(rcpt))
        assert code == caught.value.code
        t = only(transactions(rcpt=rcpt))
        assert (f"rejected-{code}", False) == (t.outcome, t.stored)
        assert t.terminator_at is not None

    async def test_drop_stores_then_disconnects(self, services: Services) -> None:
        """drop@: the message IS stored, but the client sees only a dropped connection."""
        rcpt = unique_rcpt("drop")
        message = make_message(rcpt)
        with pytest.raises(aiosmtplib.SMTPServerDisconnected):
            await send(services, [rcpt], message)
        t = only(transactions(rcpt=rcpt))
        assert (t.outcome, t.stored) == ("dropped", True)
        assert message == t.message()

    async def test_slow_waits_then_accepts(self, services: Services) -> None:
        """slow-0.5@ stores, waits half a second, then answers 250."""
        rcpt = unique_rcpt("slow-0.5")
        started = time.monotonic()
        errors, _ = await send(services, [rcpt], make_message(rcpt))
        assert errors == {}
        assert time.monotonic() - started >= 0.5
        t = only(transactions(rcpt=rcpt))
        assert (t.outcome, t.stored) == ("slow", True)

    async def test_hang_stores_and_never_answers(self, services: Services) -> None:
        """hang@ stores the message and never replies: the client times out."""
        rcpt = unique_rcpt("hang")
        with pytest.raises(aiosmtplib.SMTPTimeoutError):
            await send(services, [rcpt], make_message(rcpt), smtp_timeout=1)
        t = only(transactions(rcpt=rcpt))
        assert (t.outcome, t.stored) == ("hang", True)

    async def test_withheld_terminator_is_logged_as_incomplete(self, services: Services) -> None:
        """A client that sends DATA but never the final dot leaves an 'incomplete' record."""
        rcpt = unique_rcpt("bob")
        smtp = aiosmtplib.SMTP(
            hostname=services.smtp_host,
            port=services.smtp_port,
            use_tls=True,
            tls_context=services.ssl_context(),
        )
        await smtp.connect()
        await smtp.login(services.username, services.password)
        await smtp.mail("alice@example.test")
        await smtp.rcpt(rcpt)
        response = await smtp.execute_command(b"DATA")
        assert response.code == 354
        assert smtp.protocol is not None
        smtp.protocol.write(b"Subject: never finished\r\n\r\nno terminator\r\n")
        await asyncio.sleep(0.1)
        smtp.close()
        found = await wait_for_transactions(lambda t: rcpt in t.rcpt_tos)
        t = only(found)
        assert (t.outcome, t.terminator_at, t.stored) == ("incomplete", None, False)

    async def test_wrong_password_is_refused(self, services: Services) -> None:
        """AUTH PLAIN accepts only alice's password."""
        with pytest.raises(aiosmtplib.SMTPAuthenticationError):
            await send(
                services, ["bob@example.test"], make_message("bob@example.test"), password="x"
            )

    async def test_mail_without_auth_is_refused(self, services: Services) -> None:
        """AUTH is required before MAIL FROM."""
        with pytest.raises(aiosmtplib.SMTPSenderRefused) as caught:
            await aiosmtplib.send(
                make_message("bob@example.test"),
                sender="alice@example.test",
                recipients=["bob@example.test"],
                hostname=services.smtp_host,
                port=services.smtp_port,
                use_tls=True,
                tls_context=services.ssl_context(),
                timeout=10,
            )
        assert caught.value.code == 530

    async def test_plaintext_smtp_is_not_served(self, services: Services) -> None:
        """The submission port is implicit TLS: a plaintext client gets no greeting."""
        assert not (await plaintext_probe(services.smtp_port, b"EHLO x\r\n")).startswith(b"220")


class TestDovecotLog:
    async def test_successful_login_is_counted(self, services: Services) -> None:
        """Every successful IMAP login appears in the Dovecot log as 'Login: user=<...>'."""
        before = dovecot_login_count(services.user2, services.dovecot_log)
        imap = await open_session(services, "bob")
        await close_session(imap)
        after = await wait_for_login_count(services.user2, before + 1, services.dovecot_log)
        assert before + 1 == after

    async def test_failed_login_is_not_counted(self, services: Services) -> None:
        """A wrong password is not a login."""
        before = dovecot_login_count(services.user2, services.dovecot_log)
        with pytest.raises(IMAPCommandError):
            await open_session(dataclasses.replace(services, password2="wrong"), "bob")
        await asyncio.sleep(0.2)
        assert before == dovecot_login_count(services.user2, services.dovecot_log)


async def _bob_inbox_count(services: Services) -> int:
    imap = await open_session(services, "bob")
    try:
        response = ok(await imap.status("INBOX", "(MESSAGES)"), "STATUS")
    finally:
        await close_session(imap)
    m = re.search(rb"MESSAGES (\d+)", bytes(response.lines[0]))
    assert m is not None
    return int(m[1])
