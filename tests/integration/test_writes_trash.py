"""mail_modify trash against the real Dovecot (tool check 85, auth check 70; docs/acceptance).

The shared Trash folder only ever holds the test's own message, and only until the test
removes it again. A server without a \\Trash folder, or with two, is played by the IMAP proxy
rewriting LIST attributes; Dovecot's configuration is never touched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from support.imap_proxy import ImapProxy
from support.services import Services
from support.write_calls import expunge_uid, flags_of, seed, write_tools

pytestmark = pytest.mark.services


@pytest.fixture
async def proxy(services: Services) -> AsyncIterator[ImapProxy]:
    async with ImapProxy(services) as running:
        yield running


def without_trash_role(line: bytes) -> bytes:
    return line.replace(b"(\\Trash)", b"()") if line.startswith(b"* LIST ") else line


def junk_as_second_trash(line: bytes) -> bytes:
    return line.replace(b"(\\Junk)", b"(\\Trash)") if line.startswith(b"* LIST ") else line


class TestTrash:
    async def test_trash_moves_the_message_to_the_trash_folder(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        async with write_tools(services, proxy) as tools:
            body = await tools.ok("mail_modify", {"action": "trash", "reference": seeded.ref()})
            try:
                assert "moved" == body["status"]
                assert seeded.ref() == body["source"]
                assert "Trash" == body["destination"]["folder"]
                read = await tools.ok(
                    "mail_query", {"action": "read", "reference": body["destination"]}
                )
                assert "seed 0" == read["subject"]
                await tools.error(
                    "mail_query", {"action": "read", "reference": seeded.ref()}, "not_found"
                )
                again = await tools.error(
                    "mail_modify",
                    {"action": "trash", "reference": body["destination"]},
                    "invalid_arguments",
                )
                assert "already in the Trash" in again["error"]
            finally:
                await expunge_uid(services, "Trash", body["destination"]["uid"])
        assert 1 == proxy.count("UID MOVE")
        assert 0 == proxy.count("UID COPY", "UID EXPUNGE", "EXPUNGE", "UID STORE")

    @pytest.mark.parametrize("rewrite", [without_trash_role, junk_as_second_trash])
    async def test_no_unique_trash_folder_is_unsupported_and_nothing_moves(
        self, services: Services, rewrite: Callable[[bytes], bytes]
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, rewrite=rewrite) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.error(
                "mail_modify",
                {"action": "trash", "reference": seeded.ref()},
                "unsupported_operation",
            )
        assert {"source": seeded.ref(), "status": "not_applied"} == body["outcome"]
        assert 1 == proxy.count("LIST")
        assert 0 == proxy.count("UID MOVE", "UID COPY", "UID STORE", "SELECT")
        assert await flags_of(services, seeded.folder, seeded.uids[0]) is not None

    async def test_without_move_trash_is_unsupported_and_nothing_is_emulated(
        self, services: Services
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, hide_capabilities=["MOVE"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            await tools.error(
                "mail_modify",
                {"action": "trash", "reference": seeded.ref()},
                "unsupported_operation",
            )
        assert 0 == proxy.count("UID MOVE", "UID COPY", "UID STORE", "UID EXPUNGE", "EXPUNGE")
        assert await flags_of(services, seeded.folder, seeded.uids[0]) is not None

    async def test_a_stale_reference_is_stale_and_nothing_moves(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        stale = {**seeded.ref(), "uid_validity": seeded.uid_validity + 1}
        async with write_tools(services, proxy) as tools:
            await tools.error(
                "mail_modify", {"action": "trash", "reference": stale}, "stale_reference"
            )
        assert 0 == proxy.count("UID MOVE")

    async def test_a_missing_uid_is_not_found(self, services: Services, proxy: ImapProxy) -> None:
        seeded = await seed(services)
        missing = {**seeded.ref(), "uid": seeded.uids[0] + 1}
        async with write_tools(services, proxy) as tools:
            await tools.error("mail_modify", {"action": "trash", "reference": missing}, "not_found")
        assert 0 == proxy.count("UID MOVE")

    async def test_extra_keys_are_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        ref = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
        async with write_tools(services, proxy) as tools:
            for extra in ({"unchanged_since": 0}, {"destination": "Trash"}, {"flags": []}):
                await tools.untouched(
                    "mail_modify",
                    {"action": "trash", "reference": ref, **extra},
                    "invalid_arguments",
                )
