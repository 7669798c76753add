"""Acceptance checks of sending no other test covered end to end (docs/acceptance/sending.md).

One test per numbered check, named after it; every test runs through an in-process MCP client
against the real Redis, Dovecot and SMTP sink, in a namespace of its own.
"""

from __future__ import annotations

import asyncio
import base64
import email
import email.policy
import json
import socket
import uuid
from typing import Any

import pytest

from ledger.chain import genesis
from ledger.store.ledger_store import LedgerStore
from schemas.ledger import decode_event, decode_payload
from support.imap import close_session, open_session
from support.inprocess import mcp_client
from support.smtp_sink import transactions

TEST_BUILD = {"ANGELOS_ALLOW_FAULT_INJECTION": "1", "ANGELOS_ENV": "test"}
METADATA_URL = "https://mail.example.test/.well-known/oauth-protected-resource"
MISSING_REF = {"folder": "NoSuch-Acceptance", "uid_validity": 1, "uid": 1}


def env(services: Any, **extra: str) -> dict[str, str]:
    """The product environment with sending on and a fresh ledger namespace."""
    namespace = f"acc{uuid.uuid4().hex[:12]}"
    return {
        **services.product_env,
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": namespace,
        **extra,
    }


def fresh(prefix: str = "acc") -> str:
    """A recipient the sink has never seen."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}@example.test"


def store_of(app: Any) -> LedgerStore:
    store = app.sending.store
    assert store is not None
    return store  # type: ignore[no-any-return]


async def prepare(client: Any, to: list[str], **message: Any) -> dict[str, Any]:
    arguments = {"to": to, "subject": "Plan", "text": "Hello", **message}
    result = await client.call_tool("mail_prepare", {"action": "new", "message": arguments})
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


async def confirm(
    client: Any, pid: str, digest: str, append_sent: bool = False
) -> tuple[bool, dict[str, Any], Any]:
    result = await client.call_tool(
        "mail_send_confirmed",
        {"prepared_id": pid, "confirmed_digest": digest, "append_sent": append_sent},
    )
    return bool(result.is_error), result.structured_content, result.meta


async def status(client: Any, pid: str) -> dict[str, Any]:
    result = await client.call_tool("mail_query", {"action": "send_status", "prepared_id": pid})
    assert result.is_error is False, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


async def event_types(app: Any, pid: str) -> list[str]:
    _, entries = await store_of(app).read(pid)
    return [entry.t for entry in entries]


async def events(app: Any, pid: str) -> list[Any]:
    _, entries = await store_of(app).read(pid)
    return [decode_event(entry.e) for entry in entries]


async def namespace_keys(app: Any) -> list[str]:
    store = store_of(app)
    found = [k async for k in store.client.scan_iter(match=f"{store.keys.prefix}*", count=1000)]
    return sorted(k.decode() if isinstance(k, bytes) else k for k in found)


async def snapshot(app: Any) -> dict[str, Any]:
    """Every key of the namespace with its expiry and, for streams, its raw entries."""
    client = store_of(app).client
    seen: dict[str, Any] = {}
    for key in await send_keys(app):
        kind = await client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        content = await client.xrange(key) if kind == "stream" else await client.dump(key)
        seen[key] = (kind, await client.pexpiretime(key), content)
    return seen


async def send_keys(app: Any) -> list[str]:
    """The keys a preparation or a send writes (streams, payloads, index and sets)."""
    prefix = store_of(app).keys.prefix
    kept = ("s:", "p:", "index", "open", "unclaimed")
    return [k for k in await namespace_keys(app) if k[len(prefix) :].startswith(kept)]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class TestPreparation:
    async def test_check_9_1_4_one_prepared_entry_a_bounded_payload_and_no_content(
        self, services: Any
    ) -> None:
        canaries = [f"cnry{n}{uuid.uuid4().hex[:6]}" for n in range(7)]
        subject, body, html, to, cc, bcc, filename = canaries
        attachment = {
            "filename": f"{filename}.txt",
            "content_type": "text/plain",
            "data_base64": base64.b64encode(b"file").decode(),
        }
        async with mcp_client(env(services)) as (client, app):
            preview = await prepare(
                client,
                [f"{to}@example.test"],
                cc=[f"{cc}@example.test"],
                bcc=[f"{bcc}@example.test"],
                subject=subject,
                text=body,
                html=f"<p>{html}</p>",
                attachments=[attachment],
            )
            pid = preview["prepared_id"]
            store = store_of(app)
            raw = await store.client.xrange(store.keys.stream(pid))
            pttl = await store.client.pttl(store.keys.payload(pid))
            stored = await snapshot(app)
        assert 1 == len(raw)
        entry_id, fields = raw[0]
        assert b"0-1" == entry_id
        event = decode_event(fields[b"e"])
        assert "prepared" == event.type and genesis(pid) == event.prev
        assert 0 < pttl <= 900_000
        # The payload is private by design; everything else in the namespace must be content-free.
        payload_key = store.keys.payload(pid)
        public = repr({k: v for k, v in stored.items() if k != payload_key}).lower()
        assert [] == [c for c in canaries if c.lower() in public]

    async def test_check_9_1_5_no_scope_or_no_gate_refuses_and_writes_nothing(
        self, services: Any
    ) -> None:
        arguments = {"action": "new", "message": {"to": [fresh()], "text": "x"}}
        settings = env(services)
        async with mcp_client(settings, scopes=("mail.read", "mail.write")) as (client, app):
            scoped = await client.call_tool("mail_prepare", arguments)
            keys_after_scope = await send_keys(app)
        async with mcp_client({**settings, "MAIL_ENABLE_SEND": "0"}) as (client, app):
            gated = await client.call_tool("mail_prepare", arguments)
            keys_after_gate = await send_keys(app)
        async with mcp_client({**settings, "ANGELOS_REDIS_URL": "off"}) as (client, _):
            storeless = await client.call_tool("mail_prepare", arguments)
        assert "insufficient_scope" == scoped.structured_content["error_code"]
        assert "deployment_disabled" == gated.structured_content["error_code"]
        assert "deployment_disabled" == storeless.structured_content["error_code"]
        assert [] == keys_after_scope + keys_after_gate

    @pytest.mark.parametrize(
        "arguments",
        [
            {"action": "new", "message": {"to": None, "text": "x"}},
            {"action": "reply", "reference": MISSING_REF, "message": {"text": "x"},
             "quote_original": None},
            {"action": "forward", "reference": MISSING_REF, "message": {"to": ["a@example.test"]},
             "attachment_indexes": None},
            {"action": "forward", "reference": MISSING_REF, "message": {"to": ["a@example.test"]},
             "original_mode": None},
            {"action": "new", "message": {"to": ["a@example.test"], "text": "x"},
             "quote_original": True},
            {"action": "reply", "reference": MISSING_REF, "message": {"text": "x"},
             "original_mode": "eml"},
            {"action": "reply_all", "reference": MISSING_REF, "message": {"text": "x"},
             "attachment_indexes": [1]},
        ],
    )  # fmt: skip
    async def test_check_9_1_6_nulls_and_misplaced_options_are_invalid_before_any_read(
        self, services: Any, arguments: dict[str, Any]
    ) -> None:
        # The reference names no folder: a call that reached the mailbox would fail otherwise.
        async with mcp_client(env(services)) as (client, app):
            result = await client.call_tool("mail_prepare", arguments)
            keys = await send_keys(app)
        assert "invalid_arguments" == result.structured_content["error_code"]
        assert [] == keys


class TestConfirmation:
    async def test_check_9_3_17_the_wire_and_the_ledger_of_a_happy_send(
        self, services: Any
    ) -> None:
        rcpt, hidden = fresh("to"), fresh("bcc")
        async with mcp_client(env(services)) as (client, app):
            preview = await prepare(client, [rcpt], bcc=[hidden])
            pid = preview["prepared_id"]
            store = store_of(app)
            blob = await store.client.get(store.keys.payload(pid))
            error, outcome, _ = await confirm(client, pid, preview["digest"])
            types = await event_types(app, pid)
            payload_left = await store.client.exists(store.keys.payload(pid))
        assert error is False, outcome
        expected = {"status": "accepted", "stage": "acknowledgement", "delivery_verified": False}
        assert expected == {k: outcome[k] for k in expected}
        expected_types = ["prepared", "claimed", "smtp_attempt_started", "smtp_commit_point"]
        assert [*expected_types, "smtp_accepted"] == types
        assert 0 == payload_left
        (seen,) = transactions(services.smtp_spool, rcpt=rcpt)
        assert services.mail_from.lower() == (seen.mail_from or "").lower()
        assert sorted([rcpt, hidden]) == sorted(seen.rcpt_tos)
        assert decode_payload(blob).raw == seen.message()

    async def test_the_preparation_and_the_claim_record_the_rules_in_force(
        self, services: Any
    ) -> None:
        settings = {"SEND_RECOVERY_GRACE_S": "1000", "SEND_LEDGER_RETENTION_S": "1209600"}
        async with mcp_client(env(services, **settings)) as (client, app):
            preview = await prepare(client, [fresh()])
            await confirm(client, preview["prepared_id"], preview["digest"])
            prepared, claim = [e.data for e in (await events(app, preview["prepared_id"]))[:2]]
        assert 1_209_600_000 == getattr(prepared, "retention_ms", None)
        assert (780_000, 1_000_000) == (
            getattr(claim, "dispatch_deadline_ms", None), getattr(claim, "recovery_grace_ms", None)
        )  # fmt: skip

    async def test_check_9_3_19_a_confirm_after_acceptance_replays_and_annotates_at_most_once(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        async with mcp_client(env(services)) as (client, app):
            preview = await prepare(client, [rcpt])
            pid, digest = preview["prepared_id"], preview["digest"]
            await confirm(client, pid, digest)
            store = store_of(app)
            expiry = await store.client.pexpiretime(store.keys.stream(pid))
            error, replay, _ = await confirm(client, pid, digest)
            expiry_after = await store.client.pexpiretime(store.keys.stream(pid))
            types = await event_types(app, pid)
        assert error is False, replay
        assert ("accepted", False) == (replay["status"], replay["resent"])
        assert replay["warning"], replay  # the consumed-preparation warning
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))
        assert types.count("duplicate_confirm") <= 1
        assert expiry == expiry_after

    @pytest.mark.parametrize(
        "change",
        [
            "one_digit",
            "upper_case",
        ],
    )
    async def test_check_9_3_20_a_wrong_digest_is_refused_and_the_right_one_still_sends(
        self, services: Any, change: str
    ) -> None:
        rcpt = fresh()
        async with mcp_client(env(services)) as (client, app):
            preview = await prepare(client, [rcpt])
            pid, digest = preview["prepared_id"], preview["digest"]
            if change == "one_digit":
                wrong = ("1" if digest[0] != "1" else "2") + digest[1:]
            else:
                wrong = digest.upper() if digest != digest.upper() else "A" + digest[1:]
            error, refused, _ = await confirm(client, pid, wrong)
            claimed_after_refusal = "claimed" in await event_types(app, pid)
            ok_error, sent, _ = await confirm(client, pid, digest)
        assert error is True
        assert "operation_failed" == refused["error_code"], refused
        assert refused.get("retry_safe") is False, refused
        assert claimed_after_refusal is False
        assert ok_error is False and "accepted" == sent["status"], sent
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))

    async def test_check_9_3_21_a_foreign_owner_sees_what_an_unknown_id_shows(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        settings = env(services)
        unknown = uuid.uuid4().hex
        async with mcp_client(settings) as (client, _):
            preview = await prepare(client, [rcpt])
        pid, digest = preview["prepared_id"], preview["digest"]
        async with mcp_client(settings, owner="principal-b") as (other, _):
            _, foreign_error, _ = await confirm(other, pid, digest)
            _, unknown_error, _ = await confirm(other, unknown, digest)
            foreign_status = await status(other, pid)
            unknown_status = await status(other, unknown)
        async with mcp_client(settings) as (client, _):
            error, sent, _ = await confirm(client, pid, digest)
        assert unknown_error == foreign_error
        assert unknown_status == foreign_status
        assert ["delivery_verified", "status", "warning"] == sorted(foreign_status)
        assert "unavailable" == foreign_status["status"]
        assert error is False and "accepted" == sent["status"], sent
        assert 1 == len(transactions(services.smtp_spool, rcpt=rcpt))

    async def test_check_9_3_23_a_sent_copy_on_gmail_is_refused_before_the_claim(
        self, services: Any
    ) -> None:
        # Only the refusal half: sending with append_sent false would contact the real Gmail.
        settings = env(services, SMTP_HOST="smtp.gmail.com", MAIL_ENABLE_WRITES="1")
        async with mcp_client(settings) as (client, app):
            preview = await prepare(client, [fresh()])
            pid = preview["prepared_id"]
            error, body, _ = await confirm(client, pid, preview["digest"], append_sent=True)
            projected = await status(client, pid)
            types = await event_types(app, pid)
        assert error is True, body
        assert "append_sent=false" in body["error"], body
        assert "prepared" == projected["status"]
        assert ["prepared"] == types

    async def test_check_9_3_24_a_sent_copy_without_mail_write_is_a_step_up_before_the_claim(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        settings = env(services, MAIL_ENABLE_WRITES="1")
        async with mcp_client(settings, scopes=("mail.read", "mail.send")) as (client, app):
            app.resource_metadata_url = METADATA_URL  # as the HTTP transport sets it
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            error, body, meta = await confirm(client, pid, preview["digest"], append_sent=True)
            types = await event_types(app, pid)
        assert error is True
        assert "insufficient_scope" == body["error_code"], body
        assert ["mail.read", "mail.write", "mail.send"] == body["required_scopes"]
        assert (
            meta is not None
            and 'scope="mail.read mail.write mail.send"' in (meta["mcp/www_authenticate"][0])
        )
        assert ["prepared"] == types
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)

    async def test_check_9_3_25_a_changed_payload_byte_aborts_before_any_connection(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        marker = f"intgr{uuid.uuid4().hex[:8]}"
        async with mcp_client(env(services)) as (client, app):
            preview = await prepare(client, [rcpt], subject=marker)
            pid = preview["prepared_id"]
            store = store_of(app)
            key = store.keys.payload(pid)
            blob = await store.client.get(key)
            at = blob.index(marker.encode())
            flipped = blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1 :]
            ttl = await store.client.pttl(key)
            await store.client.set(key, flipped, px=ttl)
            error, body, _ = await confirm(client, pid, preview["digest"])
            recorded = await events(app, pid)
        assert error is True, body
        expected = {"status": "rejected", "stage": "integrity_validation", "smtp_attempted": False}
        assert expected == {k: body["outcome"][k] for k in expected}, body
        aborted = [e for e in recorded if e.type == "dispatch_aborted"]
        assert 1 == len(aborted)
        assert ("integrity_validation", "payload_hash_mismatch") == (
            aborted[0].data.stage,
            aborted[0].data.reason,
        )
        assert "smtp_attempt_started" not in [e.type for e in recorded]
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)


class TestSmtpFaults:
    async def test_check_9_4_26_a_refused_connection_is_rejected_at_connection(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        async with mcp_client(env(services, SMTP_PORT=str(closed_port()))) as (client, app):
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            error, body, _ = await confirm(client, pid, preview["digest"])
            recorded = await events(app, pid)
        assert error is False, body
        assert ("rejected", "connection") == (body["status"], body["stage"])
        (rejection,) = [e for e in recorded if e.type == "smtp_rejected"]
        assert rejection.data.network_contacted is False

    async def test_check_9_4_27_an_untrusted_certificate_is_rejected_at_connection(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        system_cas = "/etc/ssl/certs/ca-certificates.crt"
        async with mcp_client(env(services, MAIL_TLS_CA_FILE=system_cas)) as (client, _):
            preview = await prepare(client, [rcpt])
            error, body, _ = await confirm(client, preview["prepared_id"], preview["digest"])
        assert error is False, body
        assert ("rejected", "connection") == (body["status"], body["stage"])
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)

    async def test_check_9_4_29_a_refused_login_is_rejected_at_authentication(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        async with mcp_client(env(services, MAIL_PASSWORD="not-the-password")) as (client, _):
            preview = await prepare(client, [rcpt])
            error, body, _ = await confirm(client, preview["prepared_id"], preview["digest"])
        assert error is False, body
        assert ("rejected", "authentication") == (body["status"], body["stage"])
        assert "not-the-password" not in json.dumps(body)
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)

    async def test_check_9_4_34_a_late_250_never_turns_unknown_into_accepted(
        self, services: Any
    ) -> None:
        rcpt = "slow-6@example.test"  # the sink steers by the exact local part
        before = len(transactions(services.smtp_spool))
        settings = env(services, SMTP_DATA_TERMINATION_TIMEOUT_S="3", **TEST_BUILD)
        async with mcp_client(settings) as (client, _):
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            error, body, _ = await confirm(client, pid, preview["digest"])
            await asyncio.sleep(4.5)  # the sink answers 250 six seconds after the final dot
            later = await status(client, pid)
            _, replay, _ = await confirm(client, pid, preview["digest"])
        assert error is False, body
        assert "unknown" == body["status"], body
        assert "unknown" == later["status"]
        assert ("unknown", False) == (replay["status"], replay["resent"])
        assert 1 == len(transactions(services.smtp_spool)[before:])

    @pytest.mark.parametrize("code", [451, 554])
    async def test_check_9_4_35_a_negative_final_reply_is_recorded_with_its_code(
        self, services: Any, code: int
    ) -> None:
        rcpt = f"data-{code}@example.test"
        async with mcp_client(env(services)) as (client, app):
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            error, body, _ = await confirm(client, pid, preview["digest"])
            recorded = await events(app, pid)
        assert error is False, body
        assert ("rejected", "acknowledgement") == (body["status"], body["stage"])
        (rejection,) = [e for e in recorded if e.type == "smtp_rejected"]
        assert code == rejection.data.reply_code


class TestSentFiling:
    async def test_check_9_6_48_the_sent_copy_is_seen_and_byte_identical(
        self, services: Any
    ) -> None:
        rcpt, hidden = fresh(), fresh("bcc")
        async with mcp_client(env(services, MAIL_ENABLE_WRITES="1")) as (client, app):
            preview = await prepare(client, [rcpt], bcc=[hidden])
            pid = preview["prepared_id"]
            error, body, _ = await confirm(client, pid, preview["digest"], append_sent=True)
            projected = await status(client, pid)
            types = await event_types(app, pid)
        assert error is False and "accepted" == body["status"], body
        assert ("accepted", "saved") == (projected["status"], projected["sent_filing"])
        assert ["sent_filing_started", "sent_filing_succeeded"] == types[-2:]
        (seen,) = transactions(services.smtp_spool, rcpt=rcpt)
        imap = await open_session(services)
        try:
            await imap.select("Sent")
            found = await imap.uid_search(f'HEADER Message-ID "{preview["message_id"]}"')
            (uid,) = found.lines[0].split()
            fetched = await imap.uid("fetch", uid.decode(), "(FLAGS BODY.PEEK[])")
        finally:
            await close_session(imap)
        flags_line = fetched.lines[0].decode(errors="replace")
        assert "\\Seen" in flags_line
        stored = bytes(fetched.lines[1])
        assert seen.message() == stored
        parsed = email.message_from_bytes(stored, policy=email.policy.default)
        assert parsed["Bcc"] is None


class TestSendStatus:
    async def test_check_9_7_53_status_lookups_change_nothing_and_need_no_gate(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        settings = env(services)
        async with mcp_client(settings) as (client, app):
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            await confirm(client, pid, preview["digest"])
            before = await snapshot(app)
        sent_before = len(transactions(services.smtp_spool))
        gates_off = {**settings, "MAIL_ENABLE_SEND": "0", "MAIL_ENABLE_WRITES": "0"}
        async with mcp_client(gates_off) as (client, app):
            answers = [await status(client, pid) for _ in range(10)]
            after = await snapshot(app)
        assert all("accepted" == a["status"] for a in answers)
        assert before == after
        assert sent_before == len(transactions(services.smtp_spool))

    async def test_check_9_7_54_mail_read_alone_is_a_step_up_to_mail_send(
        self, services: Any
    ) -> None:
        async with mcp_client(env(services), scopes=("mail.read",)) as (client, app):
            app.resource_metadata_url = METADATA_URL  # as the HTTP transport sets it
            result = await client.call_tool(
                "mail_query", {"action": "send_status", "prepared_id": uuid.uuid4().hex}
            )
            keys = await send_keys(app)
        assert result.is_error is True
        assert "insufficient_scope" == result.structured_content["error_code"]
        assert "mail.send" == result.structured_content["required_scope"]
        assert result.meta is not None
        assert 'scope="mail.read mail.send"' in result.meta["mcp/www_authenticate"][0]
        assert [] == keys

    @pytest.mark.parametrize(
        "arguments",
        [
            {"prepared_id": ""},
            {"prepared_id": "../bad"},
            {"prepared_id": "a" * 31},
            {"prepared_id": "a" * 33},
            {"prepared_id": "A" * 32},
            {"prepared_id": "a" * 32, "extra": 1},
        ],
    )
    async def test_check_9_7_55_a_malformed_prepared_id_is_invalid_arguments(
        self, services: Any, arguments: dict[str, Any]
    ) -> None:
        async with mcp_client(env(services)) as (client, _):
            result = await client.call_tool("mail_query", {"action": "send_status", **arguments})
        assert result.is_error is True
        assert "invalid_arguments" == result.structured_content["error_code"]

    async def test_check_9_7_57_concurrent_reads_see_prepared_sending_or_the_final_status(
        self, services: Any
    ) -> None:
        rcpt = "slow-1@example.test"
        async with mcp_client(env(services)) as (client, _):
            preview = await prepare(client, [rcpt])
            pid = preview["prepared_id"]
            observed: list[str] = []
            done = asyncio.Event()

            async def watch() -> None:
                while not done.is_set():
                    observed.append((await status(client, pid))["status"])

            watchers = [asyncio.create_task(watch()) for _ in range(4)]
            await asyncio.sleep(0.05)
            _, body, _ = await confirm(client, pid, preview["digest"])
            done.set()
            await asyncio.gather(*watchers)
        assert "accepted" == body["status"], body
        assert set(observed) <= {"prepared", "sending", "accepted"}
        assert "sending" in observed


class TestAuthConfigSendChecks:
    """Auth checks 36 and 38 at the tool level (the stdio/in-process principal)."""

    async def test_auth_check_36_confirm_without_mail_send_claims_and_sends_nothing(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        settings = env(services)
        async with mcp_client(settings) as (client, _):
            preview = await prepare(client, [rcpt])
        pid = preview["prepared_id"]
        async with mcp_client(settings, scopes=("mail.read", "mail.write")) as (client, app):
            app.resource_metadata_url = METADATA_URL  # as the HTTP transport sets it
            error, body, meta = await confirm(client, pid, preview["digest"])
            types = await event_types(app, pid)
        assert error is True
        assert "insufficient_scope" == body["error_code"], body
        assert meta is not None and 'scope="mail.read mail.send"' in meta["mcp/www_authenticate"][0]
        assert ["prepared"] == types
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)

    async def test_auth_check_38_confirm_with_sending_off_is_deployment_disabled(
        self, services: Any
    ) -> None:
        rcpt = fresh()
        settings = env(services)
        async with mcp_client(settings) as (client, _):
            preview = await prepare(client, [rcpt])
        pid = preview["prepared_id"]
        async with mcp_client({**settings, "MAIL_ENABLE_SEND": "0"}) as (client, app):
            error, body, meta = await confirm(client, pid, preview["digest"])
            types = await event_types(app, pid)
        assert error is True
        assert "deployment_disabled" == body["error_code"], body
        assert "durable send store" in body["error"], body
        assert "mcp/www_authenticate" not in (meta or {})
        assert ["prepared"] == types
        assert [] == transactions(services.smtp_spool, rcpt=rcpt)
