"""SmtpSubmitter against the real steerable TLS sink: the final dot leaves only on commit()."""

from __future__ import annotations

import asyncio
import socket
import time
import traceback
import uuid

import pytest

from providers.smtp import SmtpSubmission, SmtpSubmitter
from schemas.secret import Secret
from schemas.submission import Envelope, FinalReply, MaybeSent, NotSent
from support.counting_proxy import CountingProxy
from support.services import Services
from support.smtp_servers import sink_settings
from support.smtp_sink import Transaction, transactions, wait_for_transactions

pytestmark = pytest.mark.services


def domain() -> str:
    """A recipient domain unique to one test, so its sink lines are easy to find."""
    return f"t{uuid.uuid4().hex[:12]}.example.test"


def raw_message(
    sender: str, rcpt: str, body: bytes = b"Hello from the submitter test.\r\n"
) -> bytes:
    headers = (
        f"From: Alice <{sender}>\r\nTo: {rcpt}\r\nSubject: submitter test\r\n"
        f"Message-ID: <{uuid.uuid4().hex}@example.test>\r\n\r\n"
    )
    return headers.encode() + body


def sink_lines(dom: str) -> list[Transaction]:
    return [t for t in transactions() if any(r.endswith("@" + dom) for r in t.rcpt_tos)]


async def begin(
    services: Services, local: str, body: bytes | None = None, **changes: object
) -> tuple[SmtpSubmission, str, bytes]:
    dom = domain()
    rcpt = f"{local}@{dom}"
    raw = raw_message(services.mail_from, rcpt, *(() if body is None else (body,)))
    submitter = SmtpSubmitter(sink_settings(services, **changes))
    submission = await submitter.begin(Envelope(services.mail_from, (rcpt,)), raw)
    return submission, dom, raw


class TestAcceptedPath:
    async def test_commit_returns_the_250_reply_without_its_text(self, services: Services) -> None:
        submission, _, _ = await begin(services, "ok")
        assert FinalReply(code=250, enhanced_status="2.0.0") == await submission.commit()

    async def test_the_stored_message_is_byte_identical_after_unstuffing(
        self, services: Services
    ) -> None:
        body = b".leading dot\r\n..two dots\r\n.\r\nafter a lone dot\r\nlast line\r\n"
        submission, dom, raw = await begin(services, "ok", body)
        await submission.commit()
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [f"ok@{dom}"])
        assert "accepted" == line.outcome
        assert raw == line.message()

    async def test_bare_line_endings_arrive_as_crlf(self, services: Services) -> None:
        submission, dom, raw = await begin(services, "ok", b"one\ntwo\rthree")
        await submission.commit()
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [f"ok@{dom}"])
        expected = raw.replace(b"one\ntwo\rthree", b"one\r\ntwo\r\nthree\r\n")
        assert expected == line.message()

    async def test_every_recipient_is_in_the_envelope(self, services: Services) -> None:
        dom = domain()
        rcpts = tuple(f"r{i}@{dom}" for i in range(3))
        raw = raw_message(services.mail_from, rcpts[0])
        submitter = SmtpSubmitter(sink_settings(services))
        submission = await submitter.begin(Envelope(services.mail_from, rcpts), raw)
        await submission.commit()
        [line] = await wait_for_transactions(lambda t: set(t.rcpt_tos) == set(rcpts))
        assert services.mail_from == line.mail_from


class TestTheFinalDotWaitsForCommit:
    async def test_nothing_is_submitted_until_commit_writes_the_terminator(
        self, services: Services
    ) -> None:
        submission, dom, raw = await begin(services, "ok")
        await asyncio.sleep(1.0)
        assert [] == sink_lines(dom)
        committed_at = time.time()
        await submission.commit()
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [f"ok@{dom}"])
        assert line.terminator_at is not None and line.data_started_at is not None
        assert line.terminator_at >= committed_at
        assert line.data_started_at <= committed_at - 0.9  # DATA itself was issued by begin()
        assert raw == line.message()

    async def test_abort_after_begin_leaves_no_transaction(self, services: Services) -> None:
        submission, dom, _ = await begin(services, "ok")
        await submission.abort()
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [f"ok@{dom}"])
        assert ("incomplete", None, False) == (line.outcome, line.terminator_at, line.stored)
        await asyncio.sleep(0.3)
        assert [line] == sink_lines(dom)

    async def test_abort_is_idempotent_and_commit_afterwards_is_refused(
        self, services: Services
    ) -> None:
        submission, dom, _ = await begin(services, "ok")
        await submission.abort()
        await submission.abort()
        with pytest.raises(RuntimeError):
            await submission.commit()
        await asyncio.sleep(0.3)
        assert all(t.terminator_at is None for t in sink_lines(dom))

    async def test_commit_runs_once(self, services: Services) -> None:
        submission, _, _ = await begin(services, "ok")
        await submission.commit()
        with pytest.raises(RuntimeError):
            await submission.commit()


class TestRefusals:
    @pytest.mark.parametrize(("code", "status"), [(550, "5.1.1"), (450, "4.2.0")])
    async def test_a_refused_recipient_is_not_sent_at_the_envelope(
        self, services: Services, code: int, status: str
    ) -> None:
        dom = domain()
        rcpts = (f"ok@{dom}", f"rcpt-{code}@{dom}")
        submitter = SmtpSubmitter(sink_settings(services))
        with pytest.raises(NotSent) as caught:
            await submitter.begin(
                Envelope(services.mail_from, rcpts), raw_message(services.mail_from, rcpts[0])
            )
        error = caught.value
        assert ("envelope", "recipient_refused", code, status, True) == (
            error.stage,
            error.reason,
            error.reply_code,
            error.enhanced_status,
            error.network_contacted,
        )
        await asyncio.sleep(0.3)
        assert [f"rcpt-{code}"] == [t.outcome for t in sink_lines(dom)]  # no DATA, no partial

    @pytest.mark.parametrize(("code", "status"), [(554, "5.7.1"), (451, "4.3.0")])
    async def test_a_negative_final_reply_is_not_sent_at_the_acknowledgement(
        self, services: Services, code: int, status: str
    ) -> None:
        submission, _, _ = await begin(services, f"data-{code}")
        with pytest.raises(NotSent) as caught:
            await submission.commit()
        error = caught.value
        assert ("acknowledgement", "final_reply_negative", code, status) == (
            error.stage,
            error.reason,
            error.reply_code,
            error.enhanced_status,
        )

    async def test_a_wrong_password_fails_authentication_without_showing_it(
        self, services: Services
    ) -> None:
        password = "wrong-" + uuid.uuid4().hex
        submitter = SmtpSubmitter(sink_settings(services, password=Secret(password)))
        dom = domain()
        with pytest.raises(NotSent) as caught:
            await submitter.begin(
                Envelope(services.mail_from, (f"ok@{dom}",)),
                raw_message(services.mail_from, f"ok@{dom}"),
            )
        error = caught.value
        assert ("authentication", "auth_failed", 535) == (
            error.stage,
            error.reason,
            error.reply_code,
        )
        shown = str(error) + repr(error) + "".join(traceback.format_exception(error))
        assert password not in shown
        assert dom not in shown
        assert [] == sink_lines(dom)


class TestUnknownOutcomes:
    async def test_a_dropped_connection_after_the_dot_is_maybe_sent(
        self, services: Services
    ) -> None:
        submission, dom, _ = await begin(services, "drop")
        with pytest.raises(MaybeSent) as caught:
            await submission.commit()
        assert ("acknowledgement", "connection_lost") == (caught.value.stage, caught.value.cause)
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [f"drop@{dom}"])
        assert ("dropped", True) == (line.outcome, line.stored)  # it really was stored

    async def test_a_slow_final_reply_beyond_the_timeout_is_maybe_sent(
        self, services: Services
    ) -> None:
        submission, _, _ = await begin(services, "slow-3", termination_timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(MaybeSent) as caught:
            await submission.commit()
        assert "final_reply_timeout" == caught.value.cause
        assert time.monotonic() - started < 2.5

    async def test_a_server_that_never_answers_the_dot_is_maybe_sent(
        self, services: Services
    ) -> None:
        submission, dom, _ = await begin(services, "hang", termination_timeout_s=0.5)
        with pytest.raises(MaybeSent) as caught:
            await submission.commit()
        assert "final_reply_timeout" == caught.value.cause
        [line] = await wait_for_transactions(lambda t: t.rcpt_tos == [f"hang@{dom}"])
        assert "hang" == line.outcome

    async def test_a_slow_reply_within_the_timeout_is_accepted(self, services: Services) -> None:
        submission, _, _ = await begin(services, "slow-0.5", termination_timeout_s=5.0)
        assert 250 == (await submission.commit()).code


class TestConnection:
    async def test_without_the_test_ca_the_tls_handshake_fails(self, services: Services) -> None:
        submitter = SmtpSubmitter(sink_settings(services, ca_file=None))
        dom = domain()
        with pytest.raises(NotSent) as caught:
            await submitter.begin(
                Envelope(services.mail_from, (f"ok@{dom}",)),
                raw_message(services.mail_from, f"ok@{dom}"),
            )
        assert ("connection", "tls_failed", True) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.network_contacted,
        )

    async def test_a_private_address_is_refused_before_any_tcp_connection(
        self, services: Services
    ) -> None:
        with CountingProxy("127.0.0.1", services.smtp_port) as proxy:
            settings = sink_settings(
                services, host="localhost", port=proxy.port, allow_private_hosts=False
            )
            submitter = SmtpSubmitter(settings)
            dom = domain()
            with pytest.raises(NotSent) as caught:
                await submitter.begin(
                    Envelope(services.mail_from, (f"ok@{dom}",)),
                    raw_message(services.mail_from, f"ok@{dom}"),
                )
            await asyncio.sleep(0.1)
            assert (0, 0) == proxy.snapshot()
        assert ("connection", "connect_failed", False) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.network_contacted,
        )

    async def test_the_same_proxy_does_see_an_allowed_submission(self, services: Services) -> None:
        with CountingProxy("127.0.0.1", services.smtp_port) as proxy:
            submission, _, _ = await begin(services, "ok", host="localhost", port=proxy.port)
            assert 250 == (await submission.commit()).code
            assert 1 == proxy.snapshot()[0]

    async def test_a_closed_port_is_connect_failed_without_network_contact(
        self, services: Services
    ) -> None:
        with socket.socket() as bound_not_listening:
            bound_not_listening.bind(("127.0.0.1", 0))
            port = bound_not_listening.getsockname()[1]
            submitter = SmtpSubmitter(sink_settings(services, host="127.0.0.1", port=port))
            dom = domain()
            with pytest.raises(NotSent) as caught:
                await submitter.begin(
                    Envelope(services.mail_from, (f"ok@{dom}",)),
                    raw_message(services.mail_from, f"ok@{dom}"),
                )
        assert ("connection", "connect_failed", False) == (
            caught.value.stage,
            caught.value.reason,
            caught.value.network_contacted,
        )
