"""SmtpPool against the real TLS sink and scripted servers: reuse, bounds, and what is never reused.

The sink numbers every connection it accepts (`connection` in its transaction log), so reuse is
seen from the server's side, not inferred from ours.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from providers.smtp import SmtpPool
from schemas.submission import Envelope, FinalReply, MaybeSent, NotSent
from support.services import Services
from support.smtp_servers import (
    SENDER,
    ScriptedServer,
    client_settings,
    server_tls,
    sink_settings,
)
from support.smtp_sink import Transaction, wait_for_transactions

pytestmark = pytest.mark.services


def raw_message(rcpt: str) -> bytes:
    return (
        f"From: {SENDER}\r\nTo: {rcpt}\r\nSubject: pool test\r\n"
        f"Message-ID: <{uuid.uuid4().hex}@example.test>\r\n\r\nHello.\r\n"
    ).encode()


async def send(pool: SmtpPool, rcpt: str) -> FinalReply:
    """One whole submission through a slot of the pool."""
    async with pool.slot() as slot:
        submission = await slot.begin(Envelope(SENDER, (rcpt,)), raw_message(rcpt))
        return await submission.commit()


class Domain:
    """Recipients under a domain unique to one test, and the sink lines they produced."""

    def __init__(self) -> None:
        self.name = f"p{uuid.uuid4().hex[:12]}.example.test"

    def rcpt(self, local: str) -> str:
        return f"{local}@{self.name}"

    async def lines(self, count: int) -> list[Transaction]:
        found = await wait_for_transactions(
            lambda t: any(r.endswith("@" + self.name) for r in t.rcpt_tos), count
        )
        return sorted(found, key=lambda t: t.n)


class TestReuse:
    async def test_successive_accepted_messages_travel_over_one_connection(
        self, services: Services
    ) -> None:
        pool, dom = SmtpPool(sink_settings(services), 1), Domain()
        replies = [await send(pool, dom.rcpt(f"ok{n}")) for n in range(5)]
        await pool.aclose()
        lines = await dom.lines(5)
        assert [250] * 5 == [r.code for r in replies]
        assert ["accepted"] * 5 == [t.outcome for t in lines]
        assert 1 == len({t.connection for t in lines})

    async def test_a_refused_message_closes_its_session(self, services: Services) -> None:
        pool, dom = SmtpPool(sink_settings(services), 1), Domain()
        with pytest.raises(NotSent):
            await send(pool, dom.rcpt("data-554"))
        await send(pool, dom.rcpt("ok"))
        await pool.aclose()
        refused, accepted = await dom.lines(2)
        assert ("rejected-554", "accepted") == (refused.outcome, accepted.outcome)
        assert refused.connection != accepted.connection

    async def test_a_refused_recipient_closes_its_session(self, services: Services) -> None:
        pool, dom = SmtpPool(sink_settings(services), 1), Domain()
        with pytest.raises(NotSent):
            await send(pool, dom.rcpt("rcpt-550"))
        await send(pool, dom.rcpt("ok"))
        await pool.aclose()
        refused, accepted = await dom.lines(2)
        assert refused.connection != accepted.connection

    async def test_a_final_reply_that_never_came_closes_its_session(
        self, services: Services
    ) -> None:
        pool = SmtpPool(sink_settings(services, termination_timeout_s=0.5), 1)
        dom = Domain()
        with pytest.raises(MaybeSent):
            await send(pool, dom.rcpt("hang"))
        await send(pool, dom.rcpt("ok"))
        await pool.aclose()
        hung, accepted = await dom.lines(2)
        assert hung.connection != accepted.connection

    async def test_a_session_is_replaced_after_its_message_allowance(
        self, services: Services
    ) -> None:
        pool = SmtpPool(sink_settings(services), 1, messages_per_session=2)
        dom = Domain()
        for n in range(5):
            await send(pool, dom.rcpt(f"ok{n}"))
        await pool.aclose()
        connections = [t.connection for t in await dom.lines(5)]
        first, third, fifth = connections[0], connections[2], connections[4]
        assert [first, first, third, third, fifth] == connections
        assert 3 == len(set(connections))

    async def test_a_session_idle_past_the_limit_is_not_reused(self, services: Services) -> None:
        pool, dom = SmtpPool(sink_settings(services), 1, idle_limit_s=0.0), Domain()
        await send(pool, dom.rcpt("ok1"))
        await asyncio.sleep(0.01)
        await send(pool, dom.rcpt("ok2"))
        await pool.aclose()
        first, second = await dom.lines(2)
        assert first.connection != second.connection


class TestBounds:
    async def test_no_more_connections_than_the_pool_allows_are_ever_open(
        self, services: Services
    ) -> None:
        pool, dom = SmtpPool(sink_settings(services), 2), Domain()
        replies = await asyncio.gather(*(send(pool, dom.rcpt("slow-0.2")) for _ in range(8)))
        await pool.aclose()
        lines = await dom.lines(8)
        assert [250] * 8 == [r.code for r in replies]
        assert 2 == len({t.connection for t in lines})

    async def test_waiting_is_reported_and_a_waiting_send_still_goes_out(
        self, services: Services
    ) -> None:
        pool, dom = SmtpPool(sink_settings(services), 1), Domain()
        first = asyncio.create_task(send(pool, dom.rcpt("slow-0.3")))
        await asyncio.sleep(0)  # the first send takes the only slot
        assert (True, 0) == (pool.busy(), pool.waiting)
        second = asyncio.create_task(send(pool, dom.rcpt("ok")))
        await asyncio.sleep(0)
        assert 1 == pool.waiting
        assert [250, 250] == [r.code for r in await asyncio.gather(first, second)]
        assert (False, 0) == (pool.busy(), pool.waiting)
        await pool.aclose()


class TestProbe:
    async def test_a_kept_session_that_fails_rset_is_replaced_before_any_command(
        self, services: Services
    ) -> None:
        async with ScriptedServer(server_tls(services), RSET=None) as server:
            pool = SmtpPool(client_settings(services, server.port), 1)
            await send(pool, "bob@example.test")
            await send(pool, "carol@example.test")
            await pool.aclose()
        assert 2 == server.connections
        counts = (server.verbs.count("MAIL"), server.terminators, server.verbs.count("RSET"))
        assert (2, 2, 1) == counts

    async def test_a_kept_session_answers_rset_before_its_next_message(
        self, services: Services
    ) -> None:
        async with ScriptedServer(server_tls(services)) as server:
            pool = SmtpPool(client_settings(services, server.port), 1)
            await send(pool, "bob@example.test")
            await send(pool, "carol@example.test")
            await pool.aclose()
        assert 1 == server.connections
        tail = server.verbs[server.verbs.index("DATA") + 1 :]
        assert ["RSET", "MAIL", "RCPT", "DATA", "QUIT"] == tail

    async def test_closing_the_pool_quits_its_idle_sessions(self, services: Services) -> None:
        async with ScriptedServer(server_tls(services)) as server:
            pool = SmtpPool(client_settings(services, server.port), 1)
            await send(pool, "bob@example.test")
            assert "QUIT" not in server.verbs
            await pool.aclose()
            assert "QUIT" == server.verbs[-1]
