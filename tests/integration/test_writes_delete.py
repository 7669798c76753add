"""mail_delete_permanently against the real Dovecot (tool checks 87-89, auth checks 40, 42 and 70;
docs/acceptance).

The proxy records every command, so "only `UID EXPUNGE <uid>`, never a plain EXPUNGE" is read
off the wire. It also plays servers that cannot target one message (no UIDPLUS, Gmail's
X-GM-EXT-1), a folder that does not keep \\Deleted, a refused UID EXPUNGE, and lost replies.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from providers.imap.pool import ImapPool
from providers.imap.session import ImapSession
from schemas.errors import ServiceUnavailable
from support.imap_proxy import ImapProxy
from support.services import Services
from support.write_calls import flags_of, seed, store_flags, write_tools

pytestmark = pytest.mark.services
DELETE = "mail_delete_permanently"


@pytest.fixture
async def proxy(services: Services) -> AsyncIterator[ImapProxy]:
    async with ImapProxy(services) as running:
        yield running


def with_gmail_extension(line: bytes) -> bytes:
    return line.replace(b" MOVE ", b" MOVE X-GM-EXT-1 ") if b"CAPABILITY " in line else line


def without_deleted_flag(line: bytes) -> bytes:
    return line.replace(b"\\Deleted ", b"") if b"PERMANENTFLAGS" in line else line


def expunge_refused(line: bytes) -> bytes:
    return re.sub(rb"^(\S+) OK Expunge completed[^\r\n]*", rb"\1 NO Expunge failed.", line)


class TestGates:
    async def test_delete_gate_off_is_deployment_disabled_and_the_message_stays(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        async with write_tools(services, proxy, env={"MAIL_ENABLE_DELETE": "0"}) as tools:
            body = await tools.untouched(DELETE, seeded.ref(), "deployment_disabled")
        assert "permanent deletion is disabled" in body["error"]
        assert "contact_operator" == body["retry"]["action"]
        assert await flags_of(services, seeded.folder, seeded.uids[0]) is not None

    async def test_writes_gate_off_is_deployment_disabled(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        env = {"MAIL_ENABLE_WRITES": "0"}
        async with write_tools(services, proxy, env=env) as tools:
            body = await tools.untouched(
                DELETE, {"folder": "INBOX", "uid_validity": 1, "uid": 1}, "deployment_disabled"
            )
        assert "mailbox writes are disabled" in body["error"]

    async def test_a_token_without_mail_write_is_insufficient_scope(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        async with write_tools(services, proxy, scopes=("mail.read",)) as tools:
            body = await tools.untouched(
                DELETE, {"folder": "INBOX", "uid_validity": 1, "uid": 1}, "insufficient_scope"
            )
        assert "mail.write" == body["required_scope"]

    @pytest.mark.parametrize("delete_gate", ["1", "0"])
    @pytest.mark.parametrize(
        "env",
        [
            {"IMAP_HOST": "imap.gmail.com", "IMAP_PORT": "993"},
            {
                "MAIL_PROVIDER": "gmail",
                "MAIL_AUTH_MODE": "app_password",
                "IMAP_HOST": "imap.gmail.com",
                "IMAP_PORT": "993",
                "SMTP_HOST": "smtp.gmail.com",
                "SMTP_PORT": "465",
                "SMTP_TLS_MODE": "tls",
            },
        ],
    )
    async def test_gmail_is_unsupported_with_either_gate_and_never_connects(
        self, services: Services, env: dict[str, str], delete_gate: str
    ) -> None:
        full = {**env, "MAIL_ENABLE_DELETE": delete_gate}
        dialled: list[str] = []

        async def dial() -> ImapSession:
            dialled.append("login")
            raise ServiceUnavailable("this test never lets the mailbox be dialled")

        async with write_tools(services, env=full) as tools:
            tools.app.mailbox.pool = ImapPool(dial)  # type: ignore[union-attr]
            body = await tools.error(
                DELETE, {"folder": "INBOX", "uid_validity": 1, "uid": 1}, "unsupported_operation"
            )
        assert [] == dialled
        assert "Gmail" in body["error"]
        assert "label" in body["error"]


class TestDelete:
    async def test_exactly_the_target_is_expunged_and_other_deleted_mail_stays(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services, 2)
        target, other = seeded.uids
        await store_flags(services, seeded.folder, other, "+FLAGS (\\Deleted)")
        async with write_tools(services, proxy) as tools:
            body = await tools.ok(DELETE, seeded.ref())
            await tools.error(
                "mail_query", {"action": "read", "reference": seeded.ref()}, "not_found"
            )
        assert {"source": seeded.ref(), "status": "deleted"} == body
        assert await flags_of(services, seeded.folder, target) is None
        assert {"\\Deleted"} == await flags_of(services, seeded.folder, other)
        assert [f"UID EXPUNGE {target}"] == [x for x in proxy.lines if "EXPUNGE" in x]
        assert 0 == proxy.count("EXPUNGE", "CLOSE")
        store = next(x for x in proxy.lines if x.startswith("UID STORE"))
        assert re.fullmatch(
            rf"UID STORE {target} \(UNCHANGEDSINCE \d+\) \+FLAGS \(\\Deleted\)", store
        )

    async def test_an_action_key_is_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        async with write_tools(services, proxy) as tools:
            for arguments in (
                {"action": "x", "folder": "INBOX", "uid_validity": 1, "uid": 1},
                {"reference": {"folder": "INBOX", "uid_validity": 1, "uid": 1}},
                {"folder": "INBOX", "uid_validity": 1},
                {"folder": "INBOX", "uid_validity": 0, "uid": 1},
                {"folder": "INBOX", "uid_validity": 1, "uid": 4294967296},
                {"folder": "AAMk", "provider": "microsoft_graph", "account": "a", "id": "b"},
            ):
                await tools.untouched(DELETE, arguments, "invalid_arguments")

    async def test_a_stale_reference_is_stale_and_nothing_is_marked(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        stale = {**seeded.ref(), "uid_validity": seeded.uid_validity + 1}
        async with write_tools(services, proxy) as tools:
            body = await tools.error(DELETE, stale, "stale_reference")
        assert {"source": stale, "status": "not_applied"} == body["outcome"]
        assert 0 == proxy.count("UID STORE", "UID EXPUNGE", "EXPUNGE")
        assert set() == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_a_missing_uid_is_not_found_and_nothing_is_marked(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        async with write_tools(services, proxy) as tools:
            await tools.error(DELETE, {**seeded.ref(), "uid": seeded.uids[0] + 1}, "not_found")
        assert 0 == proxy.count("UID STORE", "UID EXPUNGE", "EXPUNGE")


class TestServersThatCannotTargetOneMessage:
    async def test_without_uidplus_delete_is_unsupported_before_anything_changes(
        self, services: Services
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, hide_capabilities=["UIDPLUS"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.error(DELETE, seeded.ref(), "unsupported_operation")
        assert "UIDPLUS" in body["error"]
        assert 0 == proxy.count("SELECT", "UID STORE", "UID EXPUNGE", "EXPUNGE", "CLOSE")
        assert set() == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_a_server_advertising_x_gm_ext_1_is_refused_as_gmail(
        self, services: Services
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, rewrite=with_gmail_extension) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.error(DELETE, seeded.ref(), "unsupported_operation")
        assert "Gmail" in body["error"]
        assert 0 == proxy.count("SELECT", "UID STORE", "UID EXPUNGE", "EXPUNGE")

    async def test_a_folder_that_does_not_keep_deleted_is_unsupported(
        self, services: Services
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, rewrite=without_deleted_flag) as proxy,
            write_tools(services, proxy) as tools,
        ):
            await tools.error(DELETE, seeded.ref(), "unsupported_operation")
        assert 0 == proxy.count("UID STORE", "UID EXPUNGE", "EXPUNGE")


class TestUncertainOutcomes:
    async def test_a_lost_store_reply_is_outcome_unknown_and_nothing_is_expunged(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        proxy.cut_after.add("UID STORE")
        async with write_tools(services, proxy) as tools:
            body = await tools.error(DELETE, seeded.ref(), "outcome_unknown")
        assert {"source": seeded.ref(), "status": "unknown"} == body["outcome"]
        assert 1 == proxy.count("UID STORE")
        assert 0 == proxy.count("UID EXPUNGE", "EXPUNGE")
        assert {"\\Deleted"} == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_a_lost_expunge_reply_reports_marked_deleted(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)
        proxy.cut_after.add("UID EXPUNGE")
        async with write_tools(services, proxy) as tools:
            body = await tools.error(DELETE, seeded.ref(), "outcome_unknown")
        outcome = body["outcome"]
        assert seeded.ref() == outcome["source"]
        assert "marked_deleted" == outcome["status"]
        assert any("verify" in w for w in outcome["warnings"])
        assert any("mailbox-wide" in w for w in outcome["warnings"])
        assert 1 == proxy.count("UID EXPUNGE")
        assert 1 == proxy.connections

    async def test_a_refused_expunge_is_outcome_unknown_with_marked_deleted(
        self, services: Services
    ) -> None:
        seeded = await seed(services)
        async with (
            ImapProxy(services, rewrite=expunge_refused) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.error(DELETE, seeded.ref(), "outcome_unknown")
        assert "marked_deleted" == body["outcome"]["status"]
        assert "did not confirm" in body["error"]  # the NO itself, not a timeout
        assert 1 == proxy.count("UID EXPUNGE")

    async def test_a_message_still_present_after_expunge_is_outcome_unknown(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)

        async def second_client_undeletes() -> None:
            await store_flags(services, seeded.folder, seeded.uids[0], "-FLAGS (\\Deleted)")

        proxy.before["UID EXPUNGE"] = second_client_undeletes
        async with write_tools(services, proxy) as tools:
            body = await tools.error(DELETE, seeded.ref(), "outcome_unknown")
        assert {"source": seeded.ref(), "status": "unknown"} == body["outcome"]
        assert "still present" in body["error"]
        assert set() == await flags_of(services, seeded.folder, seeded.uids[0])

    async def test_a_change_while_marking_is_a_conflict_and_nothing_is_deleted(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        seeded = await seed(services)

        async def second_client() -> None:
            await store_flags(services, seeded.folder, seeded.uids[0], "+FLAGS (\\Seen)")

        proxy.before["UID STORE"] = second_client
        async with write_tools(services, proxy) as tools:
            body = await tools.error(DELETE, seeded.ref(), "conflict")
        assert {"source": seeded.ref(), "status": "not_applied"} == body["outcome"]
        assert 0 == proxy.count("UID EXPUNGE", "EXPUNGE")
        assert {"\\Seen"} == await flags_of(services, seeded.folder, seeded.uids[0])


class TestCapabilityReport:
    @pytest.mark.parametrize(
        ("env", "expected"),
        [
            ({}, True),
            ({"MAIL_ENABLE_DELETE": "0"}, False),
            ({"MAIL_ENABLE_WRITES": "0"}, False),
            ({"MAIL_ENABLE_DELETE": "true"}, False),
        ],
    )
    async def test_permanent_delete_enabled_follows_both_gates(
        self, services: Services, env: dict[str, str], expected: bool
    ) -> None:
        async with write_tools(services, env=env) as tools:
            body = await tools.ok("mail_query", {"action": "capabilities"})
        assert expected is body["permanent_delete_enabled"]
        assert body["server"]["uid_expunge"] is True

    async def test_permanent_delete_is_off_without_uidplus(self, services: Services) -> None:
        async with (
            ImapProxy(services, hide_capabilities=["UIDPLUS"]) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.ok("mail_query", {"action": "capabilities"})
        assert body["server"]["uid_expunge"] is False
        assert body["permanent_delete_enabled"] is False

    async def test_permanent_delete_is_off_with_gmail_labels(self, services: Services) -> None:
        async with (
            ImapProxy(services, rewrite=with_gmail_extension) as proxy,
            write_tools(services, proxy) as tools,
        ):
            body = await tools.ok("mail_query", {"action": "capabilities"})
        assert body["server"]["gmail_labels"] is True
        assert body["permanent_delete_enabled"] is False
        assert "permanent_delete_restriction" in body
