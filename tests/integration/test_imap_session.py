"""The IMAP session layer against the real Dovecot: TLS, destination rules, login, pool, limits."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest

from providers.imap import codec, responses
from providers.imap.connect import connect
from providers.imap.discovery import list_folders
from providers.imap.mailbox import ImapMailbox
from providers.imap.session import ImapSession
from providers.imap.settings import ImapSettings
from schemas.errors import SafetyLimit, ServiceUnavailable
from schemas.secret import Secret
from support.counting_proxy import CountingProxy
from support.imap import dovecot_login_count, wait_for_login_count
from support.services import Services

pytestmark = pytest.mark.services


def settings_for(services: Services, user: str = "alice", **changes: object) -> ImapSettings:
    """Settings for a test user on Dovecot, with private hosts allowed and the test CA."""
    login, password = services.credentials(user)
    base = ImapSettings(
        host=services.imap_host,
        port=services.imap_port,
        username=login,
        password=Secret(password),
        ca_file=str(services.ca_file),
        allow_private_hosts=True,
        timeout_s=10.0,
    )
    return msgspec.structs.replace(base, **changes)


@pytest.fixture
async def session(services: Services) -> AsyncIterator[ImapSession]:
    opened = await connect(settings_for(services))
    yield opened
    await opened.logout()


def kick(services: Services, user: str) -> None:
    """Make Dovecot drop every IMAP connection of `user` (server-side kill)."""
    subprocess.run(
        ["doveadm", "-c", str(services.dovecot_conf), "kick", user],
        check=True,
        capture_output=True,
        timeout=10,
    )


class TestConnect:
    async def test_tls_verified_against_the_configured_ca_reaches_login(
        self, session: ImapSession
    ) -> None:
        assert session.usable
        assert {"IMAP4REV1", "MOVE", "UIDPLUS", "CONDSTORE", "SPECIAL-USE"} <= session.capabilities

    async def test_tls_without_the_test_ca_is_refused(self, services: Services) -> None:
        with pytest.raises(ServiceUnavailable):
            await connect(settings_for(services, ca_file=None))

    async def test_a_non_public_address_is_refused_before_any_connection(
        self, services: Services
    ) -> None:
        with CountingProxy("127.0.0.1", services.imap_port) as proxy:
            with pytest.raises(ServiceUnavailable):
                await connect(settings_for(services, port=proxy.port, allow_private_hosts=False))
            assert proxy.snapshot() == (0, 0)

    async def test_private_hosts_are_dialled_when_allowed(self, services: Services) -> None:
        with CountingProxy("127.0.0.1", services.imap_port) as proxy:
            opened = await connect(settings_for(services, port=proxy.port))
            await opened.logout()
            assert proxy.snapshot()[0] == 1

    async def test_a_bad_password_is_service_unavailable_and_never_echoed(
        self, services: Services
    ) -> None:
        wrong = f"wrong-{uuid.uuid4().hex}"
        try:
            with pytest.raises(ServiceUnavailable) as caught:
                await connect(settings_for(services, password=Secret(wrong)))
        finally:
            # Dovecot delays the next login from this address by about 4 s after a failure;
            # take that delay here (a success resets it) instead of in an unrelated test.
            recovered = await connect(settings_for(services, timeout_s=30.0))
            await recovered.logout()
        assert wrong not in str(caught.value)
        assert wrong not in repr(caught.value)
        assert caught.value.__cause__ is None

    async def test_an_unresolvable_host_is_service_unavailable(self, services: Services) -> None:
        with pytest.raises(ServiceUnavailable):
            await connect(settings_for(services, host="no-such-host.invalid"))


class TestCommands:
    async def test_examine_reports_the_live_uidvalidity(self, session: ImapSession) -> None:
        result = await session.examine("INBOX")
        status = await session.status("INBOX", ["UIDVALIDITY", "UIDNEXT"])
        assert result.read_only
        assert result.uid_validity == status.items["UIDVALIDITY"]
        assert result.uid_next == status.items["UIDNEXT"]
        assert result.highest_modseq > 0

    async def test_append_reports_appenduid_and_search_finds_it(self, session: ImapSession) -> None:
        folder = f"session {uuid.uuid4().hex[:8]}"
        await session.command("CREATE", codec.mailbox_arg(folder))
        try:
            message = b"Subject: hi\r\nMessage-ID: <x@example.test>\r\n\r\nbody\r\n"
            appended = responses.parse_appenduid(
                await session.append(folder, message, flags=["\\Seen"])
            )
            selected = await session.examine(folder)
            assert appended is not None
            assert appended.uid_validity == selected.uid_validity
            found = await session.uid_search(
                codec.atom("HEADER"), codec.quote("Message-ID"), codec.quote("<x@example.test>")
            )
            assert found == appended.uids
        finally:
            await session.examine("INBOX")
            await session.command("DELETE", codec.mailbox_arg(folder))

    async def test_uid_fetch_of_1001_messages_goes_in_batches(self, session: ImapSession) -> None:
        folder = f"batch {uuid.uuid4().hex[:8]}"
        await session.command("CREATE", codec.mailbox_arg(folder))
        try:
            for n in range(1001):
                await session.append(folder, b"Subject: %d\r\n\r\nx\r\n" % n)
            await session.examine(folder)
            uids = await session.uid_search(codec.atom("ALL"))
            response = await session.uid_fetch(uids, codec.raw("(UID FLAGS)"))
            fetched = [g for g in responses.group_responses(response.lines) if b" FETCH " in g[0]]
            assert len(uids) == 1001
            assert len(fetched) == 1001
        finally:
            await session.examine("INBOX")
            await session.command("DELETE", codec.mailbox_arg(folder))

    async def test_selected_state_commands_need_an_explicit_examine(
        self, session: ImapSession
    ) -> None:
        await session.examine("INBOX")
        session.begin_lease()
        with pytest.raises(RuntimeError):
            await session.uid_search(codec.atom("ALL"))

    async def test_a_negative_reply_to_a_mutation_is_service_unavailable(
        self, session: ImapSession
    ) -> None:
        with pytest.raises(ServiceUnavailable):
            await session.command("CREATE", codec.mailbox_arg("INBOX"))
        assert session.usable


class TestReadBudget:
    async def test_more_than_12_mib_read_in_one_lease_is_a_safety_limit(
        self, services: Services
    ) -> None:
        mailbox = ImapMailbox(settings_for(services))
        folder = f"big {uuid.uuid4().hex[:8]}"
        big = b"Subject: big\r\n\r\n" + (b"x" * 998 + b"\r\n") * 6600  # about 6.6 MB
        try:
            async with mailbox.pool.session() as s:
                await s.command("CREATE", codec.mailbox_arg(folder))
                await s.append(folder, big)
                await s.append(folder, big)
            async with mailbox.pool.session() as s:  # a fresh lease reads one message fine
                await s.examine(folder)
                one = await s.uid_fetch([1], codec.raw("(BODY.PEEK[])"))
                assert big in one.lines
            with pytest.raises(SafetyLimit):
                async with mailbox.pool.session() as over:
                    await over.examine(folder)
                    await over.uid_fetch([1, 2], codec.raw("(BODY.PEEK[])"))
            async with mailbox.pool.session() as after:  # the spent session is not lent again
                assert (False, True) == (over.usable, after is not over)
        finally:
            async with mailbox.pool.session() as s:
                await s.command("DELETE", codec.mailbox_arg(folder))
            await mailbox.aclose()


class TestPool:
    # These use bob: his logins are counted and his sessions kicked without disturbing alice's.
    async def test_sequential_operations_share_one_login(self, services: Services) -> None:
        before = dovecot_login_count(services.user2, services.dovecot_log)
        mailbox = ImapMailbox(settings_for(services, "bob"))
        try:
            for _ in range(10):
                await mailbox.folders()
                await mailbox.capabilities()
        finally:
            await mailbox.aclose()
        logins = await wait_for_login_count(services.user2, before + 1, services.dovecot_log)
        await asyncio.sleep(0.2)  # a second login would have been logged by now
        assert logins == before + 1
        assert dovecot_login_count(services.user2, services.dovecot_log) == before + 1

    async def test_a_session_killed_server_side_is_discarded(self, services: Services) -> None:
        with CountingProxy("127.0.0.1", services.imap_port) as proxy:
            mailbox = ImapMailbox(settings_for(services, "bob", port=proxy.port))
            try:
                async with mailbox.pool.session() as first:
                    await list_folders(first)
                kick(services, services.user2)
                for _ in range(250):  # Dovecot's BYE and close arrive asynchronously
                    if not first.usable:
                        break
                    await asyncio.sleep(0.02)
                async with mailbox.pool.session() as second:
                    folders = await list_folders(second)
            finally:
                await mailbox.aclose()
            connections = proxy.snapshot()[0]
        assert "INBOX" in [f.name for f in folders]
        assert (2, True) == (connections, second is not first)

    async def test_concurrent_users_never_exceed_the_pool_size(self, services: Services) -> None:
        with CountingProxy("127.0.0.1", services.imap_port) as proxy:
            mailbox = ImapMailbox(settings_for(services, port=proxy.port), pool_size=2)
            try:
                await asyncio.gather(*(mailbox.folders() for _ in range(8)))
            finally:
                await mailbox.aclose()
            assert proxy.snapshot()[0] <= 2
