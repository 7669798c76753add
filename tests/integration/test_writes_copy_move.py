"""mail_create copy and mail_modify move against the real Dovecot (tool checks 70-71, 84 and 86,
auth check 70; docs/acceptance).

Sources and destinations are fresh folders, never the fixture corpus. The IMAP proxy records
every command, so "no MOVE issued" or "no COPY/EXPUNGE issued" is observed on the wire; it also
plays a server without MOVE or without COPYUID, and loses a reply after Dovecot executed it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from support.imap_proxy import ImapProxy
from support.services import Services
from support.write_calls import expunge_uid, flags_of, new_folder, seed, write_tools

pytestmark = pytest.mark.services
MUTATING = ("UID COPY", "UID MOVE", "UID STORE", "UID EXPUNGE", "EXPUNGE", "COPY", "MOVE")


@pytest.fixture
async def proxy(services: Services) -> AsyncIterator[ImapProxy]:
    async with ImapProxy(services) as running:
        yield running


class TestCopy:
    async def test_copy_reports_the_destination_from_copyuid_and_keeps_the_source(
        self, services: Services
    ) -> None:
        source = await seed(services, flags=["\\Flagged"])
        destination, validity = await new_folder(services)
        async with write_tools(services) as tools:
            before = await tools.ok("mail_query", {"action": "read", "reference": source.ref()})
            body = await tools.ok(
                "mail_create",
                {"action": "copy", "reference": source.ref(), "destination": destination},
            )
            assert "copied" == body["status"]
            assert source.ref() == body["source"]
            assert destination == body["destination"]["folder"]
            assert validity == body["destination"]["uid_validity"]
            assert "warnings" not in body
            copy = await tools.ok(
                "mail_query", {"action": "read", "reference": body["destination"]}
            )
            after = await tools.ok("mail_query", {"action": "read", "reference": source.ref()})
        assert before["subject"] == copy["subject"]
        # \\Recent belongs to the session that first selects read-write (here our COPY).
        for read in (before, after):
            read["flags"] = [f for f in read["flags"] if f != "\\Recent"]
        assert before == after
        assert {"\\Flagged"} == await flags_of(services, source.folder, source.uids[0])

    async def test_copy_to_the_same_folder_is_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        ref = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
        async with write_tools(services, proxy) as tools:
            for destination in ("INBOX", "inbox"):
                await tools.untouched(
                    "mail_create",
                    {"action": "copy", "reference": ref, "destination": destination},
                    "invalid_arguments",
                )
            await tools.untouched(
                "mail_create",
                {"action": "copy", "reference": {**ref, "folder": "A"}, "destination": "A"},
                "invalid_arguments",
            )

    async def test_copy_to_a_missing_folder_is_unavailable_with_an_unknown_outcome(
        self, services: Services
    ) -> None:
        source = await seed(services)
        async with write_tools(services) as tools:
            body = await tools.error(
                "mail_create",
                {"action": "copy", "reference": source.ref(), "destination": "NoSuch-writes"},
                "service_unavailable",
            )
        assert {"source": source.ref(), "status": "unknown"} == body["outcome"]

    async def test_a_stale_reference_issues_no_copy(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        stale = {**source.ref(), "uid_validity": source.uid_validity + 1}
        async with write_tools(services, proxy) as tools:
            body = await tools.error(
                "mail_create",
                {"action": "copy", "reference": stale, "destination": destination},
                "stale_reference",
            )
        assert {"source": stale, "status": "not_applied"} == body["outcome"]
        assert 0 == proxy.count(*MUTATING)

    async def test_a_missing_uid_is_not_found_and_issues_no_copy(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        source = await seed(services, 2)
        destination, _ = await new_folder(services)
        await expunge_uid(services, source.folder, source.uids[0])
        async with write_tools(services, proxy) as tools:
            for uid in (source.uids[0], source.uids[1] + 50):
                await tools.error(
                    "mail_create",
                    {
                        "action": "copy",
                        "reference": {**source.ref(), "uid": uid},
                        "destination": destination,
                    },
                    "not_found",
                )
        assert 0 == proxy.count(*MUTATING)

    async def test_without_copyuid_the_copy_is_accepted_with_a_verify_warning(
        self, services: Services
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        async with (
            ImapProxy(services, strip_codes=["COPYUID"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.ok(
                "mail_create",
                {"action": "copy", "reference": source.ref(), "destination": destination},
            )
        assert "accepted" == body["status"]
        assert "destination" not in body
        assert source.ref() == body["source"]
        assert "search the destination" in body["warnings"][0]

    async def test_a_lost_copy_reply_is_outcome_unknown_and_never_retried(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        proxy.cut_after.add("UID COPY")
        async with write_tools(services, proxy) as tools:
            body = await tools.error(
                "mail_create",
                {"action": "copy", "reference": source.ref(), "destination": destination},
                "outcome_unknown",
            )
            connections = proxy.connections
            # The next call opens a fresh session; the broken one was discarded, not reused.
            await tools.ok("mail_query", {"action": "read", "reference": source.ref()})
        assert {"source": source.ref(), "status": "unknown"} == body["outcome"]
        assert "verify_outcome" == body["retry"]["action"]
        assert 1 == proxy.count("UID COPY")
        assert connections + 1 == proxy.connections

    async def test_a_graph_reference_is_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        ref = {"folder": "AAMk", "provider": "microsoft_graph", "account": "acc", "id": "m1"}
        async with write_tools(services, proxy) as tools:
            await tools.untouched(
                "mail_create",
                {"action": "copy", "reference": ref, "destination": "Archive"},
                "invalid_arguments",
            )


class TestMove:
    async def test_move_reports_the_new_reference_and_the_old_one_is_gone(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        source = await seed(services)
        destination, validity = await new_folder(services)
        async with write_tools(services, proxy) as tools:
            body = await tools.ok(
                "mail_modify",
                {"action": "move", "reference": source.ref(), "destination": destination},
            )
            assert "moved" == body["status"]
            assert source.ref() == body["source"]
            assert destination == body["destination"]["folder"]
            assert validity == body["destination"]["uid_validity"]
            await tools.ok("mail_query", {"action": "read", "reference": body["destination"]})
            await tools.error(
                "mail_query", {"action": "read", "reference": source.ref()}, "not_found"
            )
        assert 1 == proxy.count("UID MOVE")
        assert 0 == proxy.count("UID COPY", "COPY", "UID EXPUNGE", "EXPUNGE", "UID STORE")

    async def test_a_stale_reference_issues_no_move(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        stale = {**source.ref(), "uid_validity": source.uid_validity - 1}
        async with write_tools(services, proxy) as tools:
            body = await tools.error(
                "mail_modify",
                {"action": "move", "reference": stale, "destination": destination},
                "stale_reference",
            )
        assert "refresh_reference" == body["retry"]["action"]
        assert {"source": stale, "status": "not_applied"} == body["outcome"]
        assert 0 == proxy.count(*MUTATING)
        assert await flags_of(services, source.folder, source.uids[0]) is not None

    async def test_a_missing_uid_is_not_found_and_issues_no_move(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        missing = {**source.ref(), "uid": source.uids[0] + 1}
        async with write_tools(services, proxy) as tools:
            await tools.error(
                "mail_modify",
                {"action": "move", "reference": missing, "destination": destination},
                "not_found",
            )
        assert 0 == proxy.count(*MUTATING)

    async def test_without_move_the_server_is_refused_and_nothing_is_emulated(
        self, services: Services
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        async with (
            ImapProxy(services, hide_capabilities=["MOVE"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.error(
                "mail_modify",
                {"action": "move", "reference": source.ref(), "destination": destination},
                "unsupported_operation",
            )
            capabilities = await tools.ok("mail_query", {"action": "capabilities"})
        assert capabilities["server"]["move"] is False
        assert "check_capabilities" == body["retry"]["action"]
        assert 0 == proxy.count(*MUTATING)
        assert 0 == proxy.count("SELECT")
        assert await flags_of(services, source.folder, source.uids[0]) is not None

    async def test_without_copyuid_the_move_is_accepted_with_a_verify_warning(
        self, services: Services
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        async with (
            ImapProxy(services, strip_codes=["COPYUID"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.ok(
                "mail_modify",
                {"action": "move", "reference": source.ref(), "destination": destination},
            )
            listed = await tools.ok(
                "mail_query", {"action": "search", "search": {"folder": destination}}
            )
        assert "accepted" == body["status"]
        assert "destination" not in body
        assert "search the destination" in body["warnings"][0]
        assert 1 == proxy.count("UID MOVE")
        # It did move: gone from the source, one message in the destination.
        assert await flags_of(services, source.folder, source.uids[0]) is None
        assert 1 == len(listed["messages"])

    async def test_a_lost_move_reply_is_outcome_unknown_and_never_retried(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        source = await seed(services)
        destination, _ = await new_folder(services)
        proxy.cut_after.add("UID MOVE")
        async with write_tools(services, proxy) as tools:
            body = await tools.error(
                "mail_modify",
                {"action": "move", "reference": source.ref(), "destination": destination},
                "outcome_unknown",
            )
        assert {"source": source.ref(), "status": "unknown"} == body["outcome"]
        assert "verify_outcome" == body["retry"]["action"]
        assert 1 == proxy.count("UID MOVE")
        assert 1 == proxy.connections
        assert await flags_of(services, source.folder, source.uids[0]) is None

    async def test_a_move_to_a_missing_folder_is_unavailable_and_the_source_stays(
        self, services: Services
    ) -> None:
        source = await seed(services)
        async with write_tools(services) as tools:
            body = await tools.error(
                "mail_modify",
                {"action": "move", "reference": source.ref(), "destination": "NoSuch-writes"},
                "service_unavailable",
            )
        assert {"source": source.ref(), "status": "unknown"} == body["outcome"]
        assert await flags_of(services, source.folder, source.uids[0]) is not None

    async def test_a_move_from_a_missing_folder_is_unavailable_and_not_applied(
        self, services: Services
    ) -> None:
        ref = {"folder": "NoSuch-writes-src", "uid_validity": 1, "uid": 1}
        async with write_tools(services) as tools:
            body = await tools.error(
                "mail_modify",
                {"action": "move", "reference": ref, "destination": "Archive"},
                "service_unavailable",
            )
        assert {"source": ref, "status": "not_applied"} == body["outcome"]

    async def test_move_to_the_same_folder_is_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        ref = {"folder": "Archive", "uid_validity": 7, "uid": 3}
        async with write_tools(services, proxy) as tools:
            await tools.untouched(
                "mail_modify",
                {"action": "move", "reference": ref, "destination": "Archive"},
                "invalid_arguments",
            )
