"""mail_modify flags against the real Dovecot (tool checks 79-82, auth check 71; docs/acceptance).

A second IMAP client (raw aioimaplib as alice) changes flags between our read and our
conditional STORE - both before the call (the caller's `unchanged_since` is older) and inside
it, between the snapshot and the STORE (the proxy runs the change just before forwarding UID
STORE, so Dovecot answers [MODIFIED]).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from support.imap_proxy import ImapProxy
from support.services import Services
from support.write_calls import Tools, flags_of, seed, store_flags, write_tools

pytestmark = pytest.mark.services


@pytest.fixture
async def proxy(services: Services) -> AsyncIterator[ImapProxy]:
    async with ImapProxy(services) as running:
        yield running


def flags_call(ref: dict[str, Any], operation: str, flags: list[str], **extra: Any) -> Any:
    return {"action": "flags", "reference": ref, "operation": operation, "flags": flags, **extra}


async def modseq_of(tools: Tools, ref: dict[str, Any]) -> int:
    read = await tools.ok("mail_query", {"action": "read", "reference": ref})
    value: int = read["modseq"]
    return value


class TestConditionalChanges:
    async def test_adding_flagged_is_conditional_and_raises_the_modseq(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        ref = seeded.ref()
        async with write_tools(services, proxy) as tools:
            observed = await modseq_of(tools, ref)
            body = await tools.ok("mail_modify", flags_call(ref, "add", ["\\Flagged"]))
        assert ref == body["reference"]
        assert "\\Flagged" in body["flags"]
        assert body["conditional"] is True
        assert body["modseq"] > observed
        assert "warnings" not in body
        stores = [line for line in proxy.lines if line.startswith("UID STORE")]
        assert 1 == len(stores)
        assert "UNCHANGEDSINCE" in stores[0]
        assert "+FLAGS (\\Flagged)" in stores[0]
        assert {"\\Flagged"} == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_an_older_unchanged_since_is_a_conflict_and_changes_nothing(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        ref = seeded.ref()
        async with write_tools(services, proxy) as tools:
            observed = await modseq_of(tools, ref)
            await store_flags(services, seeded.folder, seeded.uids[0], "+FLAGS (\\Answered)")
            body = await tools.error(
                "mail_modify",
                flags_call(ref, "add", ["\\Flagged"], unchanged_since=observed),
                "conflict",
            )
        assert "refresh_reference" == body["retry"]["action"]
        assert {"reference": ref, "flags": [], "conditional": False} == body["outcome"]
        assert 0 == proxy.count("UID STORE")
        assert {"\\Answered"} == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_a_change_between_snapshot_and_store_comes_back_modified_as_conflict(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        ref = seeded.ref()

        async def second_client() -> None:
            await store_flags(services, seeded.folder, seeded.uids[0], "+FLAGS (\\Answered)")

        async with write_tools(services, proxy) as tools:
            observed = await modseq_of(tools, ref)
            proxy.before["UID STORE"] = second_client
            body = await tools.error(
                "mail_modify",
                flags_call(ref, "add", ["\\Flagged"], unchanged_since=observed),
                "conflict",
            )
        assert "UID STORE" not in proxy.before, "the second client's change did run"
        assert 1 == proxy.count("UID STORE")
        assert {"reference": ref, "flags": [], "conditional": False} == body["outcome"]
        assert {"\\Answered"} == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_the_current_modseq_as_unchanged_since_succeeds(self, services: Services) -> None:
        seeded = await seed(services)
        ref = seeded.ref()
        async with write_tools(services) as tools:
            observed = await modseq_of(tools, ref)
            body = await tools.ok(
                "mail_modify", flags_call(ref, "add", ["\\Seen"], unchanged_since=observed)
            )
        assert "\\Seen" in body["flags"]
        assert body["modseq"] > observed

    async def test_the_largest_modseq_is_accepted_exactly(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        body_since = 18_446_744_073_709_551_615
        async with write_tools(services, proxy) as tools:
            body = await tools.ok(
                "mail_modify",
                flags_call(seeded.ref(), "add", ["\\Seen"], unchanged_since=body_since),
            )
        assert body["conditional"] is True
        # The STORE is guarded by the freshly read modseq, not by the caller's upper bound.
        store = next(line for line in proxy.lines if line.startswith("UID STORE"))
        assert str(body_since) not in store

    async def test_adding_a_flag_already_set_succeeds_without_a_new_modseq(
        self, services: Services
    ) -> None:
        seeded = await seed(services, flags=["\\Flagged"])
        ref = seeded.ref()
        async with write_tools(services) as tools:
            observed = await modseq_of(tools, ref)
            body = await tools.ok("mail_modify", flags_call(ref, "add", ["\\Flagged"]))
        assert "\\Flagged" in body["flags"]
        assert body["conditional"] is True
        assert observed == body["modseq"]


class TestFlagRules:
    @pytest.mark.parametrize(
        "flags", [["\\Deleted"], ["\\Recent"], ["bad flag"], [], ["\\Custom"], ["x" * 129]]
    )
    async def test_unsettable_or_malformed_flags_are_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy, flags: list[str]
    ) -> None:
        ref = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
        async with write_tools(services, proxy) as tools:
            await tools.untouched("mail_modify", flags_call(ref, "add", flags), "invalid_arguments")

    @pytest.mark.parametrize(
        "change",
        [
            {"operation": "replace"},
            {"unchanged_since": -1},
            {"unchanged_since": 18_446_744_073_709_551_616},
            {"destination": "Archive"},
        ],
    )
    async def test_a_wrong_operation_or_precondition_is_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy, change: dict[str, Any]
    ) -> None:
        call = flags_call({"folder": "INBOX", "uid_validity": 1, "uid": 1}, "add", ["\\Seen"])
        async with write_tools(services, proxy) as tools:
            await tools.untouched("mail_modify", {**call, **change}, "invalid_arguments")

    async def test_lowercase_seen_is_removed_and_a_keyword_is_added(
        self, services: Services
    ) -> None:
        seeded = await seed(services, flags=["\\Seen", "\\Flagged"])
        ref = seeded.ref()
        async with write_tools(services) as tools:
            removed = await tools.ok("mail_modify", flags_call(ref, "remove", ["\\seen"]))
            added = await tools.ok("mail_modify", flags_call(ref, "add", ["$Label1"]))
        assert "\\Seen" not in removed["flags"]
        assert "\\Flagged" in removed["flags"]
        assert "$Label1" in added["flags"]
        assert {"\\Flagged", "$Label1"} == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_the_flag_set_is_never_replaced(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services, flags=["\\Answered", "$Work"])
        async with write_tools(services, proxy) as tools:
            await tools.ok("mail_modify", flags_call(seeded.ref(), "add", ["\\Seen", "\\seen"]))
        stores = [line for line in proxy.lines if line.startswith("UID STORE")]
        assert ["+FLAGS (\\Seen)"] == [s.split(") ", 1)[1].strip() for s in stores]
        expected = {"\\Answered", "$Work", "\\Seen"}
        assert expected == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_a_keyword_the_folder_does_not_keep_is_unsupported(
        self, services: Services
    ) -> None:
        def no_keywords(line: bytes) -> bytes:
            return line.replace(b" \\*)]", b")]") if b"PERMANENTFLAGS" in line else line

        seeded = await seed(services)
        async with (
            ImapProxy(services, rewrite=no_keywords) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.error(
                "mail_modify",
                flags_call(seeded.ref(), "add", ["$Label1"]),
                "unsupported_operation",
            )
            await tools.ok("mail_modify", flags_call(seeded.ref(), "add", ["\\Seen"]))
        assert "check_capabilities" == body["retry"]["action"]
        assert 1 == proxy.count("UID STORE")
        assert {"\\Seen"} == await flags_of(services, seeded.folder, seeded.uids[0])


class TestWithoutCondstore:
    async def test_unchanged_since_without_condstore_is_unsupported(
        self, services: Services
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, hide_capabilities=["CONDSTORE", "QRESYNC"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.error(
                "mail_modify",
                flags_call(seeded.ref(), "add", ["\\Flagged"], unchanged_since=1),
                "unsupported_operation",
            )
        assert 0 == proxy.count("UID STORE")
        assert set() == await flags_of(services, seeded.folder, seeded.uids[0])
        assert "check_capabilities" == body["retry"]["action"]

    async def test_a_change_without_condstore_is_unconditional_and_says_so(
        self, services: Services
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, hide_capabilities=["CONDSTORE", "QRESYNC"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.ok("mail_modify", flags_call(seeded.ref(), "add", ["\\Flagged"]))
        assert body["conditional"] is False
        assert "modseq" not in body
        assert "without a concurrency precondition" in body["warnings"][0]
        assert "UNCHANGEDSINCE" not in next(x for x in proxy.lines if x.startswith("UID STORE"))
        assert {"\\Flagged"} == await flags_of(services, seeded.folder, seeded.uids[0])


class TestFailures:
    async def test_a_stale_reference_is_stale_with_the_flag_skeleton(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        stale = {**seeded.ref(), "uid_validity": seeded.uid_validity + 3}
        async with write_tools(services, proxy) as tools:
            body = await tools.error(
                "mail_modify", flags_call(stale, "add", ["\\Seen"]), "stale_reference"
            )
        assert {"reference": stale, "flags": [], "conditional": False} == body["outcome"]
        assert 0 == proxy.count("UID STORE")

    async def test_a_missing_uid_is_not_found(self, services: Services, proxy: ImapProxy) -> None:
        seeded = await seed(services)
        missing = {**seeded.ref(), "uid": seeded.uids[0] + 1}
        async with write_tools(services, proxy) as tools:
            await tools.error("mail_modify", flags_call(missing, "add", ["\\Seen"]), "not_found")
        assert 0 == proxy.count("UID STORE")

    async def test_a_lost_store_reply_is_outcome_unknown_and_never_retried(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        ref = seeded.ref()
        proxy.cut_after.add("UID STORE")
        async with write_tools(services, proxy) as tools:
            body = await tools.error(
                "mail_modify", flags_call(ref, "add", ["\\Flagged"]), "outcome_unknown"
            )
        outcome = body["outcome"]
        assert {"reference": ref, "flags": [], "conditional": False} == {
            k: v for k, v in outcome.items() if k != "warnings"
        }
        assert "may or may not have been applied" in outcome["warnings"][0]
        assert 1 == proxy.count("UID STORE")
        assert 1 == proxy.connections
        assert {"\\Flagged"} == await flags_of(services, seeded.folder, seeded.uids[0])
