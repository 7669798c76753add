"""SmtpSubmitter against servers started in the test: STARTTLS, missing AUTH PLAIN, odd replies.

The servers are real aiosmtpd instances (or, for replies aiosmtpd cannot produce, a scripted TLS
listener) on loopback, using the per-run test certificate from scripts/test-services.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

from providers.smtp import SmtpSettings, SmtpSubmitter
from schemas.submission import Envelope, MaybeSent, NotSent
from support.services import Services
from support.smtp_servers import SENDER, ScriptedServer, client_settings, server_tls

pytestmark = pytest.mark.services

RCPT = "bob@example.test"
RAW = (
    f"From: {SENDER}\r\nTo: {RCPT}\r\nSubject: local server test\r\n\r\n.dotted\r\nhello\r\n"
).encode()


async def submit(settings: SmtpSettings) -> int:
    submission = await SmtpSubmitter(settings).begin(Envelope(SENDER, (RCPT,)), RAW)
    return (await submission.commit()).code


class Recorder:
    """aiosmtpd handler keeping every command verb, MAIL options and delivered message."""

    def __init__(self) -> None:
        self.verbs: list[str] = []
        self.mail_options: list[str] = []
        self.messages: list[bytes] = []

    async def handle_MAIL(
        self, server: SMTP, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        envelope.mail_from = address
        self.mail_options = list(options)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Any, envelope: Any) -> str:
        self.messages.append(envelope.original_content)
        return "250 2.0.0 stored"


class RecordingSMTP(SMTP):
    """aiosmtpd's server noting each command verb before handling it."""

    async def smtp_AUTH(self, arg: str) -> None:
        self.event_handler.verbs.append("AUTH")
        await super().smtp_AUTH(arg)

    async def smtp_MAIL(self, arg: str) -> None:
        self.event_handler.verbs.append("MAIL")
        await super().smtp_MAIL(arg)

    async def smtp_STARTTLS(self, arg: str) -> None:
        self.event_handler.verbs.append("STARTTLS")
        await super().smtp_STARTTLS(arg)


def alice_only(server: SMTP, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        b"alice@example.test",
        b"alicepw",
    )
    return AuthResult(success=ok, handled=False)


@contextlib.asynccontextmanager
async def aiosmtpd_server(
    factory: Callable[[], SMTP], ssl_context: ssl.SSLContext | None = None, host: str = "127.0.0.1"
) -> AsyncIterator[int]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(factory, host=host, port=0, ssl=ssl_context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


class TestStartTls:
    async def test_a_starttls_server_accepts_after_the_upgrade(self, services: Services) -> None:
        recorder = Recorder()

        def factory() -> SMTP:
            return RecordingSMTP(
                recorder,
                hostname="localhost",
                tls_context=server_tls(services),
                require_starttls=True,
                authenticator=alice_only,
            )

        async with aiosmtpd_server(factory) as port:
            code = await submit(client_settings(services, port, tls_mode="starttls"))
        assert 250 == code
        assert ["STARTTLS", "AUTH", "MAIL"] == recorder.verbs
        assert [RAW] == recorder.messages
        assert [f"SIZE={len(RAW)}"] == recorder.mail_options

    async def test_a_server_without_starttls_is_refused_before_auth(
        self, services: Services
    ) -> None:
        recorder = Recorder()

        def factory() -> SMTP:
            return RecordingSMTP(
                recorder, hostname="localhost", auth_require_tls=False, authenticator=alice_only
            )

        async with aiosmtpd_server(factory) as port:
            with pytest.raises(NotSent) as caught:
                await submit(client_settings(services, port, tls_mode="starttls"))
        assert ("connection", "starttls_unavailable") == (caught.value.stage, caught.value.reason)
        assert [] == recorder.verbs

    async def test_an_untrusted_certificate_after_starttls_is_tls_failed(
        self, services: Services
    ) -> None:
        recorder = Recorder()

        def factory() -> SMTP:
            return RecordingSMTP(
                recorder,
                hostname="localhost",
                tls_context=server_tls(services),
                authenticator=alice_only,
            )

        async with aiosmtpd_server(factory) as port:
            with pytest.raises(NotSent) as caught:
                await submit(client_settings(services, port, tls_mode="starttls", ca_file=None))
        assert ("connection", "tls_failed") == (caught.value.stage, caught.value.reason)
        assert ["STARTTLS"] == recorder.verbs


class TestImplicitTls:
    async def test_a_failed_certificate_check_sends_no_command_at_all(
        self, services: Services
    ) -> None:
        recorder = Recorder()

        def factory() -> SMTP:
            return RecordingSMTP(
                recorder, hostname="localhost", auth_require_tls=False, authenticator=alice_only
            )

        async with aiosmtpd_server(factory, server_tls(services)) as port:
            with pytest.raises(NotSent) as caught:
                await submit(client_settings(services, port, ca_file=None))
        assert ("connection", "tls_failed", True) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.network_contacted,
        )
        assert [] == recorder.verbs

    async def test_a_certificate_for_another_name_is_tls_failed(self, services: Services) -> None:
        recorder = Recorder()

        def factory() -> SMTP:
            return RecordingSMTP(
                recorder, hostname="localhost", auth_require_tls=False, authenticator=alice_only
            )

        # 127.0.0.2 is loopback too, but the certificate names only localhost, 127.0.0.1 and ::1.
        async with aiosmtpd_server(factory, server_tls(services), host="127.0.0.2") as port:
            with pytest.raises(NotSent) as caught:
                await submit(client_settings(services, port, host="127.0.0.2"))
        assert ("connection", "tls_failed") == (caught.value.stage, caught.value.reason)
        assert [] == recorder.verbs

    @pytest.mark.parametrize("excluded", [["PLAIN"], ["PLAIN", "LOGIN"]])
    async def test_without_auth_plain_no_credential_is_sent(
        self, services: Services, excluded: list[str]
    ) -> None:
        recorder = Recorder()

        def factory() -> SMTP:
            return RecordingSMTP(
                recorder,
                hostname="localhost",
                auth_require_tls=False,
                auth_exclude_mechanism=excluded,
                authenticator=alice_only,
            )

        async with aiosmtpd_server(factory, server_tls(services)) as port:
            with pytest.raises(NotSent) as caught:
                await submit(client_settings(services, port))
        assert ("authentication", "auth_unavailable", 0) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.reply_code,
        )
        assert [] == recorder.verbs


class TestScriptedReplies:
    async def begin_against(self, services: Services, **replies: bytes | None) -> Any:
        self.server = ScriptedServer(server_tls(services), **replies)
        await self.server.__aenter__()
        settings = client_settings(services, self.server.port)
        return await SmtpSubmitter(settings).begin(Envelope(SENDER, (RCPT,)), RAW)

    @pytest.fixture(autouse=True)
    async def _cleanup(self) -> AsyncIterator[None]:
        yield
        await self.server.__aexit__()

    async def test_a_garbage_final_reply_is_maybe_sent(self, services: Services) -> None:
        submission = await self.begin_against(services, final=b"hello there\r\n")
        with pytest.raises(MaybeSent) as caught:
            await submission.commit()
        assert "malformed_reply" == caught.value.cause

    async def test_a_final_reply_outside_2xx_4xx_5xx_is_maybe_sent(
        self, services: Services
    ) -> None:
        submission = await self.begin_against(services, final=b"354 again?\r\n")
        with pytest.raises(MaybeSent) as caught:
            await submission.commit()
        assert "malformed_reply" == caught.value.cause

    async def test_a_multiline_acceptance_is_accepted(self, services: Services) -> None:
        submission = await self.begin_against(services, final=b"250-2.0.0 queued\r\n250 as 42\r\n")
        assert 250 == (await submission.commit()).code

    async def test_a_failed_quit_changes_nothing(self, services: Services) -> None:
        submission = await self.begin_against(services, QUIT=None)
        assert 250 == (await submission.commit()).code
        assert 1 == self.server.terminators

    async def test_a_refused_greeting_is_connect_failed_with_its_code(
        self, services: Services
    ) -> None:
        with pytest.raises(NotSent) as caught:
            await self.begin_against(services, greeting=b"554 5.3.2 not now\r\n")
        assert ("connection", "connect_failed", 554, "5.3.2") == (
            caught.value.stage,
            caught.value.reason,
            caught.value.reply_code,
            caught.value.enhanced_status,
        )

    async def test_a_refused_sender_is_not_sent_at_the_envelope(self, services: Services) -> None:
        with pytest.raises(NotSent) as caught:
            await self.begin_against(services, MAIL=b"553 5.7.1 not yours\r\n")
        assert ("envelope", "sender_refused", 553) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.reply_code,
        )
        assert "RCPT" not in self.server.verbs

    async def test_a_refused_data_command_is_not_sent_at_data(self, services: Services) -> None:
        with pytest.raises(NotSent) as caught:
            await self.begin_against(services, DATA=b"451 4.3.0 later\r\n")
        assert ("data", "data_refused", 451) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.reply_code,
        )

    async def test_a_connection_lost_before_the_dot_is_not_sent_at_data(
        self, services: Services
    ) -> None:
        submission = await self.begin_against(services)
        for writer in self.server._writers:
            writer.close()
        await asyncio.sleep(0.2)
        with pytest.raises(NotSent) as caught:
            await submission.commit()
        assert ("data", "body_write_failed") == (caught.value.stage, caught.value.reason)
        assert 0 == self.server.terminators

    async def test_a_silent_greeting_times_out_as_connect_failed(self, services: Services) -> None:
        self.server = ScriptedServer(server_tls(services), greeting=b"")
        await self.server.__aenter__()
        settings = client_settings(services, self.server.port, timeout_s=0.5)
        with pytest.raises(NotSent) as caught:
            await SmtpSubmitter(settings).begin(Envelope(SENDER, (RCPT,)), RAW)
        assert ("connection", "connect_failed") == (caught.value.stage, caught.value.reason)

    async def test_an_auth_challenge_is_an_authentication_failure(self, services: Services) -> None:
        with pytest.raises(NotSent) as caught:
            await self.begin_against(services, AUTH=b"334 \r\n")
        assert ("authentication", "auth_failed", 334) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.reply_code,
        )
