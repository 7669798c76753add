"""mail_create folder and mail_modify rename against the real Dovecot (tool checks 68-69 and 83;
docs/acceptance). Every folder name is fresh and unique."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from support.imap_proxy import ImapProxy
from support.services import Services
from support.write_calls import list_names, write_tools

pytestmark = pytest.mark.services


def fresh(prefix: str = "Projects") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def proxy(services: Services) -> AsyncIterator[ImapProxy]:
    async with ImapProxy(services) as running:
        yield running


class TestCreateFolder:
    async def test_a_new_folder_is_created_and_listed(self, services: Services) -> None:
        name = fresh()
        async with write_tools(services) as tools:
            assert {"created": True} == await tools.ok(
                "mail_create", {"action": "folder", "name": name}
            )
        assert name in await list_names(services)

    async def test_a_non_ascii_name_round_trips_through_modified_utf7(
        self, services: Services
    ) -> None:
        name = fresh("Été & Co")
        async with write_tools(services) as tools:
            await tools.ok("mail_create", {"action": "folder", "name": name})
            listed = await tools.ok("mail_query", {"action": "folders"})
        assert name in {f["name"] for f in listed["folders"]}

    async def test_creating_an_existing_folder_is_unavailable_with_created_false(
        self, services: Services
    ) -> None:
        name = fresh()
        async with write_tools(services) as tools:
            await tools.ok("mail_create", {"action": "folder", "name": name})
            body = await tools.error(
                "mail_create", {"action": "folder", "name": name}, "service_unavailable"
            )
        assert {"created": False} == body["outcome"]
        assert "check_service" == body["retry"]["action"]

    async def test_writes_gate_off_is_deployment_disabled_without_mailbox_access(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        name = fresh()
        async with write_tools(services, proxy, env={"MAIL_ENABLE_WRITES": "0"}) as tools:
            body = await tools.untouched(
                "mail_create", {"action": "folder", "name": name}, "deployment_disabled"
            )
        assert "contact_operator" == body["retry"]["action"]
        assert "mailbox writes are disabled" in body["error"]
        assert name not in await list_names(services)

    async def test_a_token_without_mail_write_gets_a_step_up_challenge(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        name = fresh()
        async with write_tools(services, proxy, scopes=("mail.read", "mail.send")) as tools:
            body = await tools.untouched(
                "mail_create", {"action": "folder", "name": name}, "insufficient_scope"
            )
            meta = tools.last_meta
        assert "mail.write" == body["required_scope"]
        assert meta is not None
        assert 'scope="mail.read mail.write"' in meta["mcp/www_authenticate"][0]
        assert name not in await list_names(services)

    @pytest.mark.parametrize("name", ["", "a\nb", "x\u200by", "x" * 1025])
    async def test_an_invalid_name_is_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy, name: str
    ) -> None:
        async with write_tools(services, proxy) as tools:
            await tools.untouched(
                "mail_create", {"action": "folder", "name": name}, "invalid_arguments"
            )

    async def test_a_lost_create_reply_is_outcome_unknown_and_not_retried(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        name = fresh()
        proxy.cut_after.add("CREATE")
        async with write_tools(services, proxy) as tools:
            body = await tools.error(
                "mail_create", {"action": "folder", "name": name}, "outcome_unknown"
            )
        assert {"created": False} == body["outcome"]
        assert "verify_outcome" == body["retry"]["action"]
        assert 1 == proxy.count("CREATE")
        assert 1 == proxy.cuts
        # The outcome really was uncertain: Dovecot did create it.
        assert name in await list_names(services)


class TestRename:
    async def test_a_folder_is_renamed(self, services: Services) -> None:
        old, new = fresh(), fresh("Projects2")
        async with write_tools(services) as tools:
            await tools.ok("mail_create", {"action": "folder", "name": old})
            assert {"renamed": True} == await tools.ok(
                "mail_modify", {"action": "rename", "old": old, "new": new}
            )
        names = await list_names(services)
        assert new in names
        assert old not in names

    @pytest.mark.parametrize(
        ("old", "new"), [("INBOX", "Elsewhere"), ("Projects", "inbox"), ("Same", "Same")]
    )
    async def test_inbox_or_an_unchanged_name_is_rejected_before_mailbox_access(
        self, services: Services, proxy: ImapProxy, old: str, new: str
    ) -> None:
        async with write_tools(services, proxy) as tools:
            await tools.untouched(
                "mail_modify", {"action": "rename", "old": old, "new": new}, "invalid_arguments"
            )

    async def test_renaming_inbox_reports_renamed_false(self, services: Services) -> None:
        async with write_tools(services) as tools:
            body = await tools.error(
                "mail_modify",
                {"action": "rename", "old": "INBOX", "new": fresh()},
                "invalid_arguments",
            )
        assert {"renamed": False} == body["outcome"]

    async def test_renaming_a_missing_folder_is_unavailable_with_renamed_false(
        self, services: Services
    ) -> None:
        async with write_tools(services) as tools:
            body = await tools.error(
                "mail_modify",
                {"action": "rename", "old": fresh("NoSuch"), "new": fresh()},
                "service_unavailable",
            )
        assert {"renamed": False} == body["outcome"]

    async def test_renaming_onto_an_existing_folder_is_unavailable(
        self, services: Services
    ) -> None:
        async with write_tools(services) as tools:
            body = await tools.error(
                "mail_modify",
                {"action": "rename", "old": fresh(), "new": "Archive"},
                "service_unavailable",
            )
        assert {"renamed": False} == body["outcome"]

    async def test_a_lost_rename_reply_is_outcome_unknown_and_not_retried(
        self, services: Services, proxy: ImapProxy
    ) -> None:
        old, new = fresh(), fresh()
        async with write_tools(services, proxy) as tools:
            await tools.ok("mail_create", {"action": "folder", "name": old})
            proxy.cut_after.add("RENAME")
            body = await tools.error(
                "mail_modify", {"action": "rename", "old": old, "new": new}, "outcome_unknown"
            )
        assert {"renamed": False} == body["outcome"]
        assert 1 == proxy.count("RENAME")
        assert new in await list_names(services)
