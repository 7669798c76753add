"""The access rule of service/readiness.py, on applications without any mailbox or store."""

from __future__ import annotations

import msgspec

from schemas.discovery import TOOLS
from schemas.mailbox import ServerCapabilities
from schemas.readiness import CLASS_SCOPES
from service.config import load_config
from service.context import AppContext
from service.principal import Principal, local_principal
from service.readiness import blockers, missing_scopes_note

ENV = {
    "MAIL_USERNAME": "owner@example.com",
    "MAIL_PASSWORD": "pw",
    "HOME": "/home/owner",
    "ANGELOS_REDIS_URL": "off",
    "MAIL_PROVIDER": "custom",
    "IMAP_HOST": "mail.example.com",
    "SMTP_HOST": "mail.example.com",
}
READER = local_principal("owner", ("mail.read",))
EVERYONE = local_principal("owner", ("mail.read", "mail.write", "mail.send"))
DOVECOT = ServerCapabilities(
    imap=["IMAP4REV1", "UIDPLUS"],
    move=True,
    uid_expunge=True,
    condstore=True,
    special_use=True,
    special_folders={},
    gmail_labels=False,
    permanent_delete=True,
    smtp_stores_sent=False,
)


def app_for(extra: dict[str, str]) -> AppContext:
    config = load_config({**ENV, **extra})
    assert config.mail is not None, config.problems
    return AppContext(config=config, gates=config.gates, mailbox=None, smtp_stores_sent=False)


def kinds(app: AppContext, principal: Principal, op: str, **kw: object) -> list[str]:
    return [b.kind for b in blockers(app, principal, op, **kw)]  # type: ignore[arg-type]


class TestRule:
    def test_every_tool_advertises_the_scopes_of_its_class(self) -> None:
        for tool in TOOLS:
            assert CLASS_SCOPES[tool.access] == tool.scopes

    def test_delete_lists_scope_writes_gate_provider_then_delete_gate(self) -> None:
        app = app_for({"IMAP_HOST": "imap.gmail.com"})
        found = blockers(app, READER, "delete")
        assert ["scope", "gate", "provider", "gate"] == [b.kind for b in found]
        assert ["MAIL_ENABLE_WRITES", "MAIL_ENABLE_DELETE"] == [
            b.variable for b in found if b.kind == "gate"
        ]

    def test_a_server_without_uid_expunge_blocks_delete_after_the_gates(self) -> None:
        app = app_for({"MAIL_ENABLE_WRITES": "1"})
        plain = msgspec.structs.replace(DOVECOT, uid_expunge=False, permanent_delete=False)
        assert (["gate"], ["gate", "provider"]) == (
            kinds(app, EVERYONE, "delete"),
            kinds(app, EVERYONE, "delete", server=plain),
        )

    def test_send_status_needs_the_scope_and_the_store_but_not_the_gate(self) -> None:
        app = app_for({"MAIL_ENABLE_SEND": "0"})
        assert (["scope", "store"], ["gate", "store"]) == (
            kinds(app, READER, "send_status"),
            kinds(app, EVERYONE, "send"),
        )


class TestScopeNote:
    def test_a_local_caller_is_told_the_operator_sets_its_scopes(self) -> None:
        note = missing_scopes_note(READER, ["mail.send"])
        assert "mail.send is not in ANGELOS_LOCAL_SCOPES, which the operator sets" == note

    def test_a_token_holder_is_told_the_owner_must_consent(self) -> None:
        caller = Principal("https://issuer.example", "https://mail.example/mcp", "s", frozenset())
        note = missing_scopes_note(caller, ["mail.write"])
        assert "the access token does not grant mail.write; the owner must consent to it" == note
