"""Draft APPEND over a scripted IMAP peer: flags, folders, APPENDUID, APPENDLIMIT, outcomes."""

from __future__ import annotations

import asyncio

import pytest

from providers.imap.drafts import append_draft, append_limit
from providers.imap.session import ImapSession
from providers.imap.wire import WireProtocol
from providers.mailbox import Appended
from schemas.errors import (
    InvalidArguments,
    OutcomeUnknown,
    SafetyLimit,
    ServiceUnavailable,
    UnsupportedOperation,
)
from schemas.mutations import MutationResult
from schemas.secret import Secret
from support.scripted_wire import ScriptedTransport

RAW = b"From: alice@example.test\r\n\r\nHello\r\n"
LOGIN = b"OK [CAPABILITY IMAP4rev1 SPECIAL-USE UIDPLUS %s] Logged in"


class Peer(ScriptedTransport):
    """A fake server: LOGIN and LIST answered from a table, APPEND with a literal, then `final`."""

    def __init__(self, final: bytes | None, capability: bytes, folders: bytes) -> None:
        super().__init__()
        self.final = final
        self.capability = capability
        self.folders = folders
        self.appends: list[bytes] = []
        self.literal: list[bytes] = []
        self._append_tag = ""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        raw = bytes(data)
        if self._append_tag:
            if raw != b"\r\n":
                self.literal.append(raw)
            elif self.final is not None:
                self.feed(self._append_tag.encode() + b" " + self.final + b"\r\n")
            return
        tag, _, rest = raw.decode().partition(" ")
        name = rest.split(" ", 1)[0].upper()
        if name == "APPEND":
            self.appends.append(raw)
            self._append_tag = tag
            self.feed(b"+ go ahead\r\n")
        elif name == "LOGIN":
            self.feed(tag.encode() + b" " + LOGIN % self.capability + b"\r\n")
        elif name == "LIST":
            self.feed(self.folders + tag.encode() + b" OK listed\r\n")


DRAFTS = b'* LIST (\\HasNoChildren \\Drafts) "/" Drafts\r\n* LIST () "/" INBOX\r\n'


async def session(
    final: bytes | None = b"OK [APPENDUID 38 12] done",
    *,
    capability: bytes = b"LITERAL+",
    folders: bytes = DRAFTS,
) -> tuple[ImapSession, Peer]:
    peer = Peer(final, capability, folders)
    wire = WireProtocol(asyncio.get_running_loop())
    peer.wire = wire
    wire.connection_made(peer)
    imap = ImapSession(peer, wire, 0.5)
    peer.feed(b"* OK [CAPABILITY IMAP4rev1] ready\r\n")
    await imap.handshake()
    await imap.login("alice@example.test", Secret("pw"))
    return imap, peer


class TestAppendDraft:
    async def test_the_draft_flag_and_the_exact_bytes_go_to_the_drafts_folder(self) -> None:
        imap, peer = await session()
        assert Appended("Drafts", 38, 12) == await append_draft(imap, RAW, None)
        assert [b'APPEND "Drafts" (\\Draft) {35}\r\n'] == [
            a.split(b" ", 1)[1] for a in peer.appends
        ]
        assert [RAW] == peer.literal

    async def test_an_explicit_folder_is_used_without_listing(self) -> None:
        imap, _ = await session(folders=b"")
        assert Appended("Elsewhere", 38, 12) == await append_draft(imap, RAW, "Elsewhere")

    async def test_without_appenduid_the_destination_is_unknown(self) -> None:
        imap, _ = await session(b"OK done")
        assert Appended("Drafts") == await append_draft(imap, RAW, None)

    @pytest.mark.parametrize(
        "folders",
        [b"", DRAFTS + b'* LIST (\\Drafts) "/" "Old drafts"\r\n'],
        ids=["none", "two"],
    )
    async def test_the_drafts_folder_is_never_guessed(self, folders: bytes) -> None:
        imap, peer = await session(folders=folders)
        with pytest.raises(UnsupportedOperation) as caught:
            await append_draft(imap, RAW, None)
        assert caught.value.outcome is None and [] == peer.appends

    async def test_appendlimit_is_checked_before_the_command(self) -> None:
        imap, peer = await session(capability=b"APPENDLIMIT=10")
        with pytest.raises(SafetyLimit):
            await append_draft(imap, RAW, "Drafts")
        assert [] == peer.appends

    @pytest.mark.parametrize("raw", [b"", b"x" * (5 * 1024 * 1024 + 1)])
    async def test_empty_or_oversized_bytes_are_refused_before_the_command(
        self, raw: bytes
    ) -> None:
        imap, peer = await session()
        with pytest.raises(InvalidArguments):
            await append_draft(imap, raw, "Drafts")
        assert [] == peer.appends

    async def test_a_refusal_after_the_command_reports_an_unknown_outcome(self) -> None:
        imap, _ = await session(b"NO [TRYCREATE] no such mailbox")
        with pytest.raises(ServiceUnavailable) as caught:
            await append_draft(imap, RAW, "Missing")
        assert MutationResult(status="unknown") == caught.value.outcome

    async def test_a_lost_reply_is_an_unknown_outcome(self) -> None:
        imap, _ = await session(None)
        with pytest.raises(OutcomeUnknown) as caught:
            await append_draft(imap, RAW, "Drafts")
        assert MutationResult(status="unknown") == caught.value.outcome


class TestAppendLimit:
    @pytest.mark.parametrize(
        ("capabilities", "limit"),
        [
            (frozenset({"IMAP4REV1"}), None),
            (frozenset({"APPENDLIMIT"}), None),
            (frozenset({"APPENDLIMIT=35651584", "UIDPLUS"}), 35651584),
        ],
    )
    def test_only_a_server_wide_value_counts(
        self, capabilities: frozenset[str], limit: int | None
    ) -> None:
        assert limit == append_limit(capabilities)
