"""Unknown sends resolved by evidence: the provider's own copy in the Sent folder.

Real `angelos serve` processes send through the run's SMTP sink, whose `drop@` recipients make
the sink store the message and then cut the connection before its reply: the send ends
`unknown`. The exact stored bytes are then put into the mailbox's \\Sent folder by IMAP APPEND,
standing in for a provider that files what it accepts, and `angelos ledger evidence` (or
recovery, in process and against the same Dovecot) looks for them. Nothing is ever resent: the
sink's transaction log holds exactly one transaction per send.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from faults.harness import (
    Server,
    call,
    confirm,
    ledger_cli,
    ledger_json,
    server_env,
    start_servers,
    status,
)

from ledger.dispatch.recovery import Recoverer
from ledger.ids import new_id
from ledger.projection import project
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerStore
from providers.imap.mailbox import ImapMailbox
from providers.imap.settings import ImapSettings
from schemas.ledger_events import SmtpCommitPoint
from schemas.secret import Secret
from service.config import load_config
from service.sending import sent_copy_finder
from support.imap import Append, append_messages, close_session, ok, open_session
from support.ledger import ATTEMPT, OWNER, UNKNOWN
from support.ledger_redis import advance, claimed_send, make_store
from support.services import Services
from support.smtp_sink import Transaction, transactions, wait_for_transactions

pytestmark = pytest.mark.services
TAG = uuid.uuid4().hex[:8]
SENT = "Sent"  # the test Dovecot's \Sent folder (the product finds it by its attribute)
HOUR_MS = 3_600_000


# ---------------------------------------------------------------------------------- helpers


class Unknown:
    """One send the sink stored and then cut off: its ID, Message-ID and the stored bytes."""

    def __init__(self, preview: dict[str, Any], answer: Any, seen: list[Transaction]) -> None:
        self.pid: str = preview["prepared_id"]
        self.message_id: str = preview["message_id"]
        self.answer = answer
        self.rcpt = seen[0].rcpt_tos[0]
        self.raw = seen[0].message()


def make_unknown(server: Server, label: str) -> Unknown:
    """Prepare and confirm one message to a `drop@` recipient and wait for the sink's record."""
    rcpt = f"drop@{label}{TAG}.example.test"

    async def scenario() -> tuple[dict[str, Any], Any, list[Transaction]]:
        preview = await call(
            server.url,
            "mail_prepare",
            {"action": "new", "message": {"to": [rcpt], "subject": "Evidence", "text": "Hi"}},
        )
        assert preview.get("status") == "prepared", preview
        answer = await confirm(server.url, preview)
        seen = await wait_for_transactions(lambda t: rcpt in t.rcpt_tos, within=20)
        return dict(preview), answer, seen

    preview, answer, seen = asyncio.run(scenario())
    assert answer["status"] == "unknown", answer
    return Unknown(preview, answer, seen)


def file_in_sent(services: Services, *messages: bytes) -> list[int]:
    """APPEND messages to Sent as a provider filing its copies would; return their UIDs."""

    async def scenario() -> list[int]:
        imap = await open_session(services)
        try:
            result = await append_messages(imap, SENT, [Append(m, ("\\Seen",)) for m in messages])
        finally:
            await close_session(imap)
        return result.uids

    return asyncio.run(scenario())


def sent_uidvalidity(services: Services) -> int:
    async def scenario() -> int:
        imap = await open_session(services)
        try:
            response = ok(await imap.status(SENT, "(UIDVALIDITY)"), "STATUS Sent")
        finally:
            await close_session(imap)
        line = next(bytes(x) for x in response.lines if b"UIDVALIDITY" in bytes(x))
        return int(line.split(b"UIDVALIDITY ")[1].split(b")")[0])

    return asyncio.run(scenario())


def rewritten(raw: bytes) -> bytes:
    """The same message as a provider that rewrites MIME might file it: other bytes."""
    return b"X-Filed-By: provider\r\n" + raw


def traps(message_id: str) -> list[bytes]:
    """Messages whose Message-ID field holds the searched one as a substring, and no more."""
    inner = message_id[1:-1]
    fields = [
        f"Message-ID: {message_id} <second.{TAG}@example.test>",  # two IDs in one field
        f"Message-ID: {message_id.upper()}",  # another ID: the local part is case-sensitive
        f"Message-ID: <re.{message_id}>",  # not an ID at all, yet a substring match
        f"Message-ID: <pre.{inner}>",  # a longer ID ending in this one
    ]
    return [
        f"{field}\r\nFrom: trap@example.test\r\nSubject: trap\r\n\r\ntrap\r\n".encode()
        for field in fields
    ]


def last_event(pid: str, env: dict[str, str]) -> dict[str, Any]:
    return dict(ledger_json(env, "show", pid)["events"][-1])


# ---------------------------------------------------------------------------------- a server


@pytest.fixture(scope="module")
def env(services: Services) -> dict[str, str]:
    return server_env(services, f"ev-{TAG}")


@pytest.fixture(scope="module")
def server(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    [started] = start_servers([env], tmp_path_factory.mktemp("evidence"))
    yield started
    started.stop()


class Found:
    """An unknown send, its copy filed in Sent, and what `angelos ledger evidence` said."""

    def __init__(self, send: Unknown, uids: list[int], done: Any, env: dict[str, str]) -> None:
        self.send = send
        self.uid = uids[-1]
        self.done = done
        self.view: dict[str, Any] = ledger_json(env, "show", send.pid)


@pytest.fixture(scope="module")
def identical(server: Server, env: dict[str, str], services: Services) -> Found:
    send = make_unknown(server, "same")
    uids = file_in_sent(services, *traps(send.message_id), send.raw)
    done = ledger_cli(env, "evidence", send.pid, "--by", "tester")
    return Found(send, uids, done, env)


@pytest.fixture(scope="module")
def other_bytes(server: Server, env: dict[str, str], services: Services) -> Found:
    send = make_unknown(server, "other")
    uids = file_in_sent(services, rewritten(send.raw))
    done = ledger_cli(env, "evidence", send.pid, "--by", "tester", "--json")
    return Found(send, uids, done, env)


@pytest.fixture(scope="module")
def absent(server: Server, env: dict[str, str], services: Services) -> Found:
    send = make_unknown(server, "none")
    uids = file_in_sent(services, *traps(send.message_id))
    done = ledger_cli(env, "evidence", send.pid, "--by", "tester")
    return Found(send, uids, done, env)


class TestASentCopyWithTheSubmittedBytes:
    def test_evidence_says_where_it_found_the_copy_and_that_it_is_identical(
        self, identical: Found, services: Services
    ) -> None:
        assert 0 == identical.done.returncode, identical.done.stderr
        where = f'folder "{SENT}", UIDVALIDITY {sent_uidvalidity(services)}, UID {identical.uid}'
        assert f"  {where}: identical to the submitted bytes" in identical.done.stdout
        assert "1 copy(ies)" in identical.done.stdout  # the substring traps are not copies
        assert "recorded outcome_evidence by operator:tester" in identical.done.stdout

    def test_outcome_evidence_is_appended_naming_the_copy_and_no_folder(
        self, identical: Found, services: Services
    ) -> None:
        line = identical.view["events"][-1]
        assert ("outcome_evidence", "operator:tester") == (line["type"], line["actor"])
        assert {
            "source": "sent_folder", "uid_validity": sent_uidvalidity(services),
            "uid": identical.uid, "sha256": hashlib.sha256(identical.send.raw).hexdigest(),
            "identical": True, "copies": 1,
        } == line["data"]  # fmt: skip

    def test_send_status_answers_accepted_with_the_evidence_named(
        self, identical: Found, server: Server
    ) -> None:
        answer = asyncio.run(status(server.url, identical.send.pid))
        assert ("accepted", "sent_copy", True, False) == (
            answer["status"], answer["evidence"], answer["evidence_identical"],
            answer["delivery_verified"],
        )  # fmt: skip

    def test_show_concludes_accepted_and_gives_the_copy_as_evidence(
        self, identical: Found, env: dict[str, str]
    ) -> None:
        text = ledger_cli(env, "show", identical.send.pid).stdout
        assert "status: accepted / acknowledgement" in text
        assert "proves it accepted the message" in text
        assert f"UID {identical.uid}, identical to raw_sha256" in text
        copy = identical.view["evidence"]["sent_copy"]
        assert (True, "operator:tester") == (copy["identical"], copy["by"])

    def test_verify_is_clean_and_lists_the_send_as_accepted_by_evidence(
        self, identical: Found, other_bytes: Found, absent: Found, env: dict[str, str]
    ) -> None:
        done = ledger_cli(env, "verify")
        assert 0 == done.returncode, done.stdout + done.stderr
        assert f"EVIDENCE {identical.send.pid}: accepted" in done.stdout
        assert f"INVESTIGATE {identical.send.pid}" not in done.stdout
        assert f"INVESTIGATE {absent.send.pid}: unknown" in done.stdout

    def test_an_export_replays_offline_with_the_evidence(
        self, identical: Found, env: dict[str, str], tmp_path: Path
    ) -> None:
        target = tmp_path / "one.jsonl"
        exported = ledger_cli(env, "export", "--pid", identical.send.pid, "--output", str(target))
        assert 0 == exported.returncode, exported.stderr
        replayed = json.loads(ledger_cli(env, "replay", str(target), "--json").stdout)
        assert (True, {"accepted": 1}) == (replayed["ok"], replayed["statuses"])
        assert [identical.send.pid] == [item["prepared_id"] for item in replayed["evidenced"]]
        text = ledger_cli(env, "replay", str(target)).stdout
        assert f"EVIDENCE {identical.send.pid}: accepted" in text

    def test_a_second_request_is_refused_without_a_search(
        self, identical: Found, env: dict[str, str]
    ) -> None:
        again = ledger_cli(env, "evidence", identical.send.pid, "--by", "tester")
        assert 1 == again.returncode
        assert "already accepted by evidence" in again.stderr and "Nothing searched" in again.stderr
        assert "outcome_evidence" == last_event(identical.send.pid, env)["type"]

    def test_nothing_was_resent(self, identical: Found) -> None:
        assert 1 == len(transactions(rcpt=identical.send.rcpt))


class TestACopyWithOtherBytes:
    def test_it_is_still_evidence_with_identical_false(self, other_bytes: Found) -> None:
        assert 0 == other_bytes.done.returncode, other_bytes.done.stderr
        said = json.loads(other_bytes.done.stdout)
        assert ("recorded", "accepted", False) == (
            said["result"], said["status"], said["evidence"]["identical"]
        )  # fmt: skip
        assert (
            hashlib.sha256(rewritten(other_bytes.send.raw)).hexdigest()
            == (said["copies"][0]["sha256"])
        )

    def test_send_status_is_accepted_and_says_the_bytes_differ(
        self, other_bytes: Found, server: Server
    ) -> None:
        answer = asyncio.run(status(server.url, other_bytes.send.pid))
        assert ("accepted", "sent_copy", False) == (
            answer["status"], answer["evidence"], answer["evidence_identical"]
        )  # fmt: skip

    def test_show_says_same_message_id_other_bytes(
        self, other_bytes: Found, env: dict[str, str]
    ) -> None:
        text = ledger_cli(env, "show", other_bytes.send.pid).stdout
        assert "same Message-ID, other bytes (the provider rewrote them)" in text

    def test_nothing_was_resent(self, other_bytes: Found) -> None:
        assert 1 == len(transactions(rcpt=other_bytes.send.rcpt))


class TestNoCopy:
    def test_evidence_says_absence_proves_nothing_and_records_nothing(
        self, absent: Found, env: dict[str, str]
    ) -> None:
        assert 1 == absent.done.returncode, absent.done.stderr
        assert f"no copy with Message-ID {absent.send.message_id}" in absent.done.stdout
        assert "Absence proves nothing" in absent.done.stdout
        assert "smtp_outcome_unknown" == absent.view["events"][-1]["type"]

    def test_the_status_stays_unknown(self, absent: Found, server: Server) -> None:
        answer = asyncio.run(status(server.url, absent.send.pid))
        assert ("unknown", None) == (answer["status"], answer.get("evidence"))

    def test_nothing_was_resent(self, absent: Found) -> None:
        assert 1 == len(transactions(rcpt=absent.send.rcpt))


class TestRefusals:
    def test_an_accepted_send_is_refused_and_nothing_searched(
        self, server: Server, env: dict[str, str]
    ) -> None:
        rcpt = f"ok@ok{TAG}.example.test"

        async def accepted() -> str:
            preview = await call(
                server.url,
                "mail_prepare",
                {"action": "new", "message": {"to": [rcpt], "subject": "Fine", "text": "Hi"}},
            )
            answer = await confirm(server.url, preview)
            assert answer["status"] == "accepted", answer
            return str(preview["prepared_id"])

        pid = asyncio.run(accepted())
        done = ledger_cli(env, "evidence", pid)
        assert 1 == done.returncode
        assert f"{pid} is accepted, not unknown" in done.stderr
        assert "outcome_evidence" not in [
            e["type"] for e in ledger_json(env, "show", pid)["events"]
        ]

    def test_a_malformed_id_is_refused_before_the_store_is_opened(
        self, env: dict[str, str]
    ) -> None:
        done = ledger_cli(env, "evidence", "not-an-id")
        assert (2, "angelos ledger: a prepared_id is 32 lowercase hex characters\n") == (
            done.returncode, done.stderr
        )  # fmt: skip


# ------------------------------------------------------------------ the search, in process


def imap_settings_for(services: Services) -> ImapSettings:
    return ImapSettings(
        host=services.imap_host,
        port=services.imap_port,
        username=services.username,
        password=Secret(services.password),
        ca_file=str(services.ca_file),
        allow_private_hosts=True,
        timeout_s=10.0,
    )


@pytest.fixture
async def mailbox(services: Services) -> AsyncIterator[ImapMailbox]:
    opened = ImapMailbox(imap_settings_for(services))
    yield opened
    await opened.aclose()


async def append_to_sent(services: Services, *messages: bytes) -> list[int]:
    imap = await open_session(services)
    try:
        return (await append_messages(imap, SENT, list(messages))).uids
    finally:
        await close_session(imap)


async def raw_search(services: Services, message_id: str) -> list[int]:
    """The server's own HEADER search, which matches substrings (independent of the product)."""
    imap = await open_session(services)
    try:
        ok(await imap.select(SENT), "SELECT Sent")
        found = ok(await imap.uid_search(f'HEADER Message-ID "{message_id}"'), "UID SEARCH")
    finally:
        await close_session(imap)
    words = [word for line in found.lines[:-1] for word in bytes(line).split()]
    return [int(word) for word in words if word.isdigit()]


class TestTheSearch:
    async def test_a_message_whose_message_id_merely_contains_this_one_is_not_a_copy(
        self, services: Services, mailbox: ImapMailbox
    ) -> None:
        message_id = f"<{new_id()}@search.example.test>"
        trap_uids = await append_to_sent(services, *traps(message_id))
        hits = await raw_search(services, message_id)
        assert len(set(hits) & set(trap_uids)) >= 2  # the server's substring search takes them
        assert [] == await mailbox.find_sent_copies(message_id)
        real = f"Message-ID: {message_id}\r\nSubject: real\r\n\r\nreal\r\n".encode()
        [uid] = await append_to_sent(services, real)
        [copy] = await mailbox.find_sent_copies(message_id)
        assert (SENT, uid, hashlib.sha256(real).hexdigest(), len(real)) == (
            copy.folder, copy.uid, copy.sha256, copy.size
        )  # fmt: skip


# ------------------------------------------------------------------ recovery, in process


@pytest.fixture
async def store(services: Services) -> AsyncIterator[LedgerStore]:
    """A namespace of its own, on the run's Redis."""
    client = connect(services.redis_url)
    namespace = f"ev-{new_id()[:12]}"
    yield make_store(client, namespace, retention_ms=604_800_000)
    keys = [key async for key in client.scan_iter(match=f"{namespace}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def unknown_in_ledger(store: LedgerStore) -> tuple[str, bytes]:
    """An unknown send written straight through the store's scripts, and its exact bytes."""
    pid, head = await claimed_send(store)
    raw = (
        f"Message-ID: <{pid}@example.test>\r\nFrom: a@example.test\r\nSubject: lost reply\r\n"
        "\r\nbody\r\n"
    ).encode()
    commit = SmtpCommitPoint(wire_bytes=len(raw), raw_sha256=hashlib.sha256(raw).hexdigest())
    await advance(store, pid, head, ATTEMPT, commit, UNKNOWN)
    return pid, raw


async def types_of(store: LedgerStore, pid: str) -> list[str]:
    _, entries = await store.read(pid)
    return [entry.t for entry in entries]


def of(report: Any, pid: str) -> list[str]:
    return [d.action for d in report.decisions if d.pid == pid and d.kind == "evidence"]


class TestRecovery:
    async def test_recovery_records_the_copy_once_the_grace_has_passed_and_not_before(
        self, services: Services, store: LedgerStore, mailbox: ImapMailbox
    ) -> None:
        pid, raw = await unknown_in_ledger(store)
        await append_to_sent(services, raw)
        early = await Recoverer(store, grace_ms=HOUR_MS, finder=mailbox).run_once()
        assert ["too_early"] == of(early, pid)
        assert "outcome_evidence" not in await types_of(store, pid)
        late = await Recoverer(store, grace_ms=0, finder=mailbox).run_once()
        assert ["evidenced"] == of(late, pid)
        now, entries = await store.read(pid)
        answer = project(entries, OWNER, now)
        assert ("accepted", "sent_copy", True) == (
            answer.status, answer.evidence, answer.evidence_identical
        )  # fmt: skip
        assert entries[-1].e.count('"actor":"recovery:') == 1
        assert await store.client.zscore(store.keys.evidence, pid) is None

    async def test_without_a_copy_the_send_stays_unknown_and_the_next_search_is_set(
        self, store: LedgerStore, mailbox: ImapMailbox
    ) -> None:
        pid, _ = await unknown_in_ledger(store)
        report = await Recoverer(store, grace_ms=0, finder=mailbox).run_once()
        [decision] = [d for d in report.decisions if d.pid == pid]
        assert "no_evidence" == decision.action
        assert decision.decidable_ms == await store.client.zscore(store.keys.evidence, pid)
        assert decision.decidable_ms > report.server_ms
        assert "smtp_outcome_unknown" == (await types_of(store, pid))[-1]

    async def test_recovery_does_not_search_where_the_provider_does_not_file_sent(
        self, services: Services, store: LedgerStore, mailbox: ImapMailbox
    ) -> None:
        mail = load_config(services.product_env).mail
        assert mail is not None
        quiet = msgspec.structs.replace(mail, smtp_stores_sent=False)
        finder = sent_copy_finder(quiet, mailbox)
        assert finder is None
        files_sent = msgspec.structs.replace(mail, smtp_stores_sent=True)
        assert mailbox is sent_copy_finder(files_sent, mailbox)
        pid, raw = await unknown_in_ledger(store)
        await append_to_sent(services, raw)
        report = await Recoverer(store, grace_ms=0, finder=finder).run_once()
        assert [] == of(report, pid)
        assert "smtp_outcome_unknown" == (await types_of(store, pid))[-1]
