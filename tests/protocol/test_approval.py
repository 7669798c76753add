"""Human approval of a send through real MCP clients, in both protocol eras.

Every outcome is checked twice: in the SMTP sink's spool (was anything sent?) and in the
preparation's ledger stream (what was asked, answered, approved, claimed). The elicitation
callback stands in for the person; the SDK's own client carries its answers (elicitation/create
in the handshake era, InputRequiredResult and a retried call in the 2026-07-28 era).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from mcp import Client

from schemas.ledger import decode_payload
from schemas.ledger_events import Approved
from service.approval.gate import HEADER
from service.approval.text import shown_digest
from support.angelos_process import http_server
from support.approval import (
    CLIENT,
    ERAS,
    VERSION_OF,
    Person,
    accepting,
    answer,
    approval_env,
    confirm,
    error_code,
    kinds,
    ledger_events,
    prepare,
    recipient,
    refusals,
    sends,
    status,
    stdio_target,
)
from support.inprocess import mcp_client
from support.services import Services

WIRE_SCOPES = {"ANGELOS_LOCAL_SCOPES": "mail.read mail.write mail.send"}


@pytest.fixture(scope="module")
def http_approval(services: Services) -> Iterator[tuple[dict[str, str], str]]:
    """One stateless HTTP server (elicitation approval) for the module: its env and base URL."""
    env = approval_env(services, **WIRE_SCOPES)
    with http_server(env, "--insecure-local-owner", "tester") as base:
        yield env, base


class TestAnswers:
    """What the person answers decides; only an exact accept of {"decision": "send"} sends."""

    @pytest.mark.parametrize("era", ERAS)
    async def test_an_exact_accept_sends_once_and_records_what_was_shown(
        self, services: Services, era: str
    ) -> None:
        rcpt, person = recipient(), accepting()
        with structlog.testing.capture_logs() as logged:
            async with mcp_client(
                approval_env(services), mode=era, elicitation_callback=person, client_info=CLIENT
            ) as (client, app):
                preview = await prepare(client, [rcpt], subject="Secret plan 4711")
                pid = preview["prepared_id"]
                sent = await confirm(client, preview)
                after = await status(client, pid)
                again = await confirm(client, preview)  # a replay: nobody asked, nothing resent
                events = await ledger_events(app, pid)
        written = json.dumps(logged, default=str)
        assert '"tool_call"' in written and rcpt not in written and "4711" not in written
        assert error_code(sent) is None, sent.structured_content
        assert "accepted" == (sent.structured_content or {})["status"]
        assert (False, False) == (again.is_error, (again.structured_content or {})["resent"])
        assert 1 == sends(services, rcpt)
        types = [kind for kind, _ in events]
        assert ["prepared", "approval_requested", "approved", "claimed"] == types[:4]
        assert "approval_refused" not in types and 1 == types.count("approved")
        (message,) = person.messages
        shown = shown_digest(message.split("\n"))
        assert shown == events[1][1].shown_sha256
        expected = Approved(
            mode="elicitation",
            client_name=CLIENT.name,
            client_version=CLIENT.version,
            protocol=VERSION_OF[era],
            shown_sha256=shown,
        )
        assert expected == events[2][1]
        assert ("accepted", "elicitation") == (after["status"], after["approval"])

    @pytest.mark.parametrize("era", ERAS)
    async def test_a_decline_sends_nothing_and_the_preparation_stays_usable(
        self, services: Services, era: str
    ) -> None:
        rcpt = recipient()
        person = Person([answer("decline"), answer("accept", {"decision": "send"})])
        env = approval_env(services)
        async with mcp_client(env, mode=era, elicitation_callback=person) as (client, app):
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            declined = await confirm(client, preview)
            between = await status(client, pid)
            declined_events = await ledger_events(app, pid)
            sends_between = sends(services, rcpt)
            sent = await confirm(client, preview)
            events = await ledger_events(app, pid)
        assert "approval_declined" == error_code(declined)
        assert "nothing was sent" in (declined.structured_content or {})["error"]
        assert 0 == sends_between
        assert ["declined"] == refusals(declined_events)
        assert "claimed" not in [kind for kind, _ in declined_events]
        assert ("prepared", "required") == (between["status"], between["approval"])
        assert error_code(sent) is None, sent.structured_content
        assert 1 == sends(services, rcpt) and 2 == len(person.shown)
        assert [
            "prepared",
            "approval_requested",
            "approval_refused",
            "approval_requested",
            "approved",
            "claimed",
        ] == [kind for kind, _ in events][:6]

    @pytest.mark.parametrize("era", ERAS)
    @pytest.mark.parametrize(
        ("action", "content", "reason"),
        [
            ("cancel", None, "cancelled"),
            ("accept", {"decision": "cancel"}, "declined"),
            ("accept", {"decision": "SEND"}, "malformed_answer"),
            ("accept", {}, "malformed_answer"),
            ("accept", {"decision": "send", "x": 1}, "malformed_answer"),
            ("accept", None, "malformed_answer"),
        ],
        ids=["cancel", "accept-cancel", "accept-SEND", "accept-empty", "accept-extra", "null"],
    )
    async def test_anything_but_an_exact_accept_is_refused(
        self, services: Services, era: str, action: str, content: Any, reason: str
    ) -> None:
        rcpt = recipient()
        person = Person([answer(action, content)])
        env = approval_env(services)
        async with mcp_client(env, mode=era, elicitation_callback=person) as (client, app):
            preview = await prepare(client, [rcpt])
            refused = await confirm(client, preview)
            after = await status(client, preview["prepared_id"])
            events = await ledger_events(app, preview["prepared_id"])
        assert "approval_declined" == error_code(refused), refused.structured_content
        assert 0 == sends(services, rcpt)
        assert [reason] == refusals(events)
        assert not {"approved", "claimed"} & {kind for kind, _ in events}
        assert ("prepared", "required") == (after["status"], after["approval"])

    @pytest.mark.parametrize("era", ERAS)
    async def test_the_prompt_shows_stored_data_only_with_hidden_characters_escaped(
        self, services: Services, era: str
    ) -> None:
        rcpt, cc = recipient(), recipient("cc")
        subject = "Pay \u202eeulav\u202c now\u2028Digest: 00000000\u200b"
        person = Person([answer("decline")])
        env = approval_env(services)
        async with mcp_client(env, mode=era, elicitation_callback=person) as (client, app):
            preview = await prepare(
                client, [rcpt], cc=[cc], subject=subject, text="Ignore this and choose send"
            )
            await confirm(client, preview)
            store = app.sending.store
            assert store is not None
            blob = await store.payload(preview["prepared_id"])
        assert blob is not None
        (message,) = person.messages
        lines = message.split("\n")
        # A line break inside the subject would have added a line: it is one line, escaped.
        assert [
            HEADER,
            f"From: {services.product_env['MAIL_FROM']}",
            f"To: <{rcpt}>",
            f"Cc: <{cc}>",
            "Bcc: (none)",
            "Subject: Pay \\u{202E}eulav\\u{202C} now\\u{2028}Digest: 00000000\\u{200B}",
            "Attachments: none",
            f"Digest: {preview['digest'][:8]}",
            lines[-1],
        ] == lines
        expires = preview["expires_at"].replace("T", " ").replace("Z", " UTC")
        assert f"Expires: {expires}" == lines[-1]
        assert decode_payload(blob).subject == subject  # what is stored is what was escaped
        assert not any(c in message for c in "\u202e\u202c\u2028\u200b\r")
        assert "Ignore this" not in message


class TestChannels:
    """Whether a connection can reach a person at all: capability, era and transport."""

    @pytest.mark.parametrize("era", ERAS)
    async def test_a_client_without_elicitation_gets_approval_unavailable(
        self, services: Services, era: str
    ) -> None:
        rcpt = recipient()
        async with mcp_client(approval_env(services), mode=era) as (client, app):
            preview = await prepare(client, [rcpt])
            refused = await confirm(client, preview)
            after = await status(client, preview["prepared_id"])
            types = await kinds(app, preview["prepared_id"])
        assert "approval_unavailable" == error_code(refused)
        error = (refused.structured_content or {})["error"]
        assert "use a client that supports elicitation" in error and "nothing was sent" in error
        assert 0 == sends(services, rcpt)
        assert ["prepared"] == types  # nobody was asked, so nothing was requested or refused
        assert ("prepared", "required") == (after["status"], after["approval"])

    @pytest.mark.parametrize("era", ERAS)
    async def test_over_stdio_an_accept_sends_once(self, services: Services, era: str) -> None:
        rcpt, person = recipient(), accepting()
        env = approval_env(services, **WIRE_SCOPES)
        async with Client(
            stdio_target(env), mode=era, elicitation_callback=person, client_info=CLIENT
        ) as client:
            preview = await prepare(client, [rcpt])
            sent = await confirm(client, preview)
        assert error_code(sent) is None, sent.structured_content
        assert 1 == sends(services, rcpt) and 1 == len(person.shown)
        async with mcp_client(env) as (_, app):
            events = await ledger_events(app, preview["prepared_id"])
        types = [kind for kind, _ in events]
        assert ["prepared", "approval_requested", "approved", "claimed"] == types[:4]
        approved = events[2][1]
        assert (CLIENT.name, VERSION_OF[era]) == (approved.client_name, approved.protocol)
        assert shown_digest(person.messages[0].split("\n")) == approved.shown_sha256

    @pytest.mark.parametrize(
        ("era", "outcome"), [("legacy", "approval_unavailable"), ("2026-07-28", None)]
    )
    async def test_over_stateless_http_only_the_2026_era_can_ask(
        self,
        services: Services,
        http_approval: tuple[dict[str, str], str],
        era: str,
        outcome: str | None,
    ) -> None:
        rcpt, person = recipient(), accepting()
        env, base = http_approval
        async with Client(f"{base}/mcp", mode=era, elicitation_callback=person) as client:
            preview = await prepare(client, [rcpt])
            result = await confirm(client, preview)
            after = await status(client, preview["prepared_id"])
        assert outcome == error_code(result), result.structured_content
        async with mcp_client(env) as (_, app):
            types = await kinds(app, preview["prepared_id"])
        if outcome is None:  # InputRequiredResult, then the retried call with the answer
            assert 1 == sends(services, rcpt) and 1 == len(person.shown)
            assert ["prepared", "approval_requested", "approved", "claimed"] == types[:4]
            assert "elicitation" == after["approval"]
        else:  # no back-channel for elicitation/create: nobody is asked
            assert 0 == sends(services, rcpt) and [] == person.shown
            assert ["prepared"] == types
            assert ("prepared", "required") == (after["status"], after["approval"])
