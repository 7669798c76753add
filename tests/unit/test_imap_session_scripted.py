"""ImapSession and ImapPool over an in-memory scripted IMAP peer (no network)."""

from __future__ import annotations

import asyncio

import pytest

from providers.imap import codec
from providers.imap.discovery import list_folders
from providers.imap.pool import ImapPool
from providers.imap.session import ImapSession
from schemas.errors import OutcomeUnknown, SafetyLimit, ServiceUnavailable
from schemas.secret import Secret
from support.scripted_imap import EXAMINE, Reply, open_session, silent, tagged


def list_lines(count: int) -> bytes:
    return b"".join(b'* LIST () "/" "folder %d"\r\n' % n for n in range(count))


class TestHandshakeAndLogin:
    async def test_greeting_capabilities_save_a_round_trip(self) -> None:
        session, peer = await open_session()
        assert peer.commands == ["LOGIN"]
        assert "MOVE" in session.capabilities

    async def test_username_is_quoted_and_an_8_bit_password_sent_as_a_literal(self) -> None:
        session, peer = await open_session(login=False)
        await session.login('al ice"x', Secret("pässw"))
        assert peer.written[0].split(b" ", 1)[1] == b'LOGIN "al ice\\"x" {6+}\r\np\xc3\xa4ssw\r\n'

    async def test_a_refused_login_is_a_generic_service_unavailable(self) -> None:
        session, _ = await open_session(
            {"LOGIN": tagged(b"NO [AUTHENTICATIONFAILED] Authentication failed.")}, login=False
        )
        with pytest.raises(ServiceUnavailable) as caught:
            await session.login("alice@example.test", Secret("s3cret-value"))
        assert str(caught.value) == ServiceUnavailable.default_message
        assert not session.usable

    async def test_a_bye_greeting_is_refused(self) -> None:
        with pytest.raises(ServiceUnavailable):
            await open_session(greeting=b"* BYE too many connections\r\n")

    async def test_capabilities_are_asked_for_when_the_login_reply_has_none(self) -> None:
        session, peer = await open_session(
            {
                "LOGIN": tagged(b"OK Logged in"),
                "CAPABILITY": tagged(b"OK done", b"* CAPABILITY IMAP4rev1 IDLE\r\n"),
            }
        )
        assert peer.commands == ["LOGIN", "CAPABILITY"]
        assert session.capabilities == frozenset({"IMAP4REV1", "IDLE"})


class TestResponses:
    async def test_999_list_lines_in_one_read_parse_without_recursion_trouble(self) -> None:
        session, _ = await open_session({"LIST": tagged(b"OK done", list_lines(999))})
        folders = await list_folders(session)
        assert len(folders) == 999
        assert folders[-1].name == "folder 998"

    async def test_more_than_1000_folders_is_a_safety_limit_and_the_session_survives(
        self,
    ) -> None:
        session, _ = await open_session({"LIST": tagged(b"OK done", list_lines(1500))})
        with pytest.raises(SafetyLimit):
            await list_folders(session)
        assert session.usable

    async def test_star_space_inside_a_name_is_kept(self) -> None:
        session, _ = await open_session(
            {"LIST": tagged(b"OK done", b'* LIST () "/" "Reisen * 2024 * Plan"\r\n')}
        )
        assert [f.name for f in await list_folders(session)] == ["Reisen * 2024 * Plan"]

    async def test_reading_past_the_budget_is_a_safety_limit_and_breaks_the_session(
        self,
    ) -> None:
        session, _ = await open_session(
            {"LIST": tagged(b"OK done", list_lines(100))}, read_budget=2000
        )
        with pytest.raises(SafetyLimit):
            await list_folders(session)
        assert not session.usable


class TestFailures:
    async def test_no_reply_to_a_read_is_service_unavailable(self) -> None:
        session, _ = await open_session({"NOOP": silent}, timeout_s=0.2)
        with pytest.raises(ServiceUnavailable):
            await session.noop()
        assert not session.usable

    async def test_no_reply_to_a_mutation_is_outcome_unknown(self) -> None:
        session, _ = await open_session({"CREATE": silent}, timeout_s=0.2)
        with pytest.raises(OutcomeUnknown):
            await session.command("CREATE", codec.mailbox_arg("New"))

    async def test_a_lost_connection_fails_the_command_at_once(self) -> None:
        session, peer = await open_session({"NOOP": silent}, timeout_s=30)

        async def drop() -> None:
            await asyncio.sleep(0.05)
            peer.abort()

        dropper = asyncio.create_task(drop())
        with pytest.raises(ServiceUnavailable):
            await asyncio.wait_for(session.noop(), 2)
        await dropper

    async def test_cancelling_a_command_leaves_the_session_unusable(self) -> None:
        session, _ = await open_session({"NOOP": silent}, timeout_s=30)
        task = asyncio.create_task(session.noop())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not session.usable

    async def test_a_closed_session_refuses_commands(self) -> None:
        session, _ = await open_session()
        await session.close()
        with pytest.raises(ServiceUnavailable):
            await session.noop()


class TestCommandSurface:
    @pytest.mark.parametrize("name", ["CLOSE", "EXPUNGE", "FETCH", "SELECT", "XYZZY"])
    async def test_unsafe_or_special_commands_are_not_available(self, name: str) -> None:
        session, _ = await open_session()
        with pytest.raises(ValueError):
            await session.command(name)

    async def test_selected_state_commands_need_a_select_in_this_lease(self) -> None:
        session, _ = await open_session()
        await session.examine("INBOX")
        await session.uid_search(codec.atom("ALL"))
        session.begin_lease()
        with pytest.raises(RuntimeError):
            await session.uid_search(codec.atom("ALL"))

    async def test_examine_sends_condstore_and_an_encoded_name(self) -> None:
        session, peer = await open_session()
        result = await session.examine("Café")
        assert peer.written[-1].split(b" ", 1)[1] == b'EXAMINE "Caf&AOk-" (CONDSTORE)\r\n'
        assert (result.uid_validity, result.uid_next, result.exists) == (7, 4, 3)

    async def test_uid_fetch_goes_in_batches_of_500(self) -> None:
        session, peer = await open_session()
        await session.examine("INBOX")
        await session.uid_fetch(range(1, 1201), codec.raw("(FLAGS)"))
        sent = [w.split(b" ", 1)[1] for w in peer.written[-3:]]
        assert sent == [
            b"UID FETCH 1:500 (FLAGS)\r\n",
            b"UID FETCH 501:1000 (FLAGS)\r\n",
            b"UID FETCH 1001:1200 (FLAGS)\r\n",
        ]


class HeldExamine:
    """Reply makers that answer an EXAMINE only once the FETCH behind it has arrived."""

    def __init__(self, examine: bytes, fetch: bytes) -> None:
        self.examine, self.fetch = examine, fetch
        self.examine_tag = ""

    def hold(self, tag: str, line: str) -> None:
        self.examine_tag = tag
        return None

    def release(self, tag: str, line: str) -> bytes:
        examined = self.examine.replace(b"TAG", self.examine_tag.encode())
        return examined + self.fetch + tag.encode() + b" OK fetched\r\n"

    def replies(self) -> dict[str, Reply]:
        return {"EXAMINE": self.hold, "UID FETCH": self.release}


BODY_ANSWER = b"* 2 FETCH (UID 3 FLAGS () RFC822.SIZE 5 BODY[]<0> {5}\r\nhello)\r\n"


class TestExamineAndFetch:
    async def test_the_fetch_goes_out_before_the_examine_is_answered(self) -> None:
        # The peer answers nothing until both lines arrived: waiting would time out.
        held = HeldExamine(EXAMINE + b"TAG OK [READ-ONLY] done\r\n", BODY_ANSWER)
        session, peer = await open_session(held.replies())
        selected, answer = await session.examine_and_fetch("INBOX", [3], codec.raw("(BODY.PEEK[])"))
        assert peer.commands[-2:] == ["EXAMINE", "UID FETCH"]
        assert (selected.uid_validity, selected.uid_next) == (7, 4)
        assert [b"2 FETCH (UID 3 FLAGS () RFC822.SIZE 5 BODY[]<0> {5}", b"hello", b")"] == (
            answer.lines
        )
        assert session.selected_name == "INBOX"
        assert session.usable

    async def test_a_refused_examine_fails_and_the_session_stays_usable(self) -> None:
        held = HeldExamine(b"TAG NO no such folder\r\n", b"")
        replies = held.replies()
        replies["UID FETCH"] = lambda tag, line: (
            held.examine.replace(b"TAG", held.examine_tag.encode())
            + tag.encode()
            + b" BAD no mailbox selected\r\n"
        )
        session, _ = await open_session(replies)
        with pytest.raises(ServiceUnavailable, match="refused EXAMINE"):
            await session.examine_and_fetch("Gone", [3], codec.raw("(BODY.PEEK[])"))
        assert session.usable
        assert session.selected is None
        with pytest.raises(RuntimeError):  # nothing is selected as far as the API goes
            await session.uid_search(codec.atom("ALL"))
        await session.noop()

    async def test_a_silent_server_breaks_the_session(self) -> None:
        session, _ = await open_session({"EXAMINE": silent, "UID FETCH": silent}, timeout_s=0.2)
        with pytest.raises(ServiceUnavailable, match="did not answer"):
            await session.examine_and_fetch("INBOX", [3], codec.raw("(BODY.PEEK[])"))
        assert not session.usable


class Opened(list[ImapSession]):
    """The sessions a pool opened (one login each), in order: an open_session that records."""

    def __init__(self, replies: dict[str, Reply] | None = None, timeout_s: float = 1.0) -> None:
        super().__init__()
        self.replies = replies
        self.timeout_s = timeout_s

    async def __call__(self) -> ImapSession:
        session, _ = await open_session(self.replies, timeout_s=self.timeout_s)
        self.append(session)
        return session


class TestPool:
    async def test_sequential_leases_reuse_one_session(self) -> None:
        opened = Opened()
        pool = ImapPool(opened)
        lent = []
        for _ in range(5):
            async with pool.session() as session:
                await session.noop()
                lent.append(session)
        assert (1, opened * 5) == (len(opened), lent)

    async def test_a_long_idle_session_is_noop_checked_and_dropped_when_dead(self) -> None:
        opened = Opened({"NOOP": tagged(b"BAD gone")})
        pool = ImapPool(opened, idle_check_after_s=0)
        async with pool.session():
            pass
        await asyncio.sleep(0.01)
        async with pool.session() as second:
            pass
        assert (2, False, second) == (len(opened), opened[0].usable, opened[1])

    async def test_a_broken_session_is_not_returned(self) -> None:
        opened = Opened({"NOOP": silent}, timeout_s=0.05)
        pool = ImapPool(opened)
        with pytest.raises(ServiceUnavailable):
            async with pool.session() as session:
                await session.noop()
        assert not session.usable
        opened.replies = None  # the next login answers NOOP again
        async with pool.session() as fresh:
            await fresh.noop()
        assert [session, fresh] == opened

    async def test_concurrent_leases_never_exceed_the_size(self) -> None:
        opened = Opened()
        pool = ImapPool(opened, size=2)
        active = peak = 0

        async def use() -> None:
            nonlocal active, peak
            async with pool.session():
                active += 1
                peak = max(peak, active)
                await asyncio.sleep(0.01)
                active -= 1

        await asyncio.gather(*(use() for _ in range(6)))
        assert (peak, len(opened)) == (2, 2)

    async def test_aclose_logs_out_idle_sessions_and_refuses_new_leases(self) -> None:
        pool = ImapPool(Opened())
        async with pool.session() as session:
            pass
        await pool.aclose()
        assert not session.usable
        with pytest.raises(ServiceUnavailable):
            async with pool.session():
                pass
