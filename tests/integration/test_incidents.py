"""Incidents made the real way, and what `angelos ledger show` concludes about each.

Real `angelos serve --transport http` processes send through the run's SMTP sink, which drops
the connection after storing a message or refuses a recipient when told to by the recipient's
local part; a fault-point server kills itself right after its claim; a one-second preparation
lifetime makes a confirm arrive too late, before and after the sweeper; a scripted SMTP server
holds its reply to the end of the data past a one-second tool deadline; a private Redis is
killed between the end of the data and the sink's 250. Only the "past the recovery grace"
cases (the grace is at least 68 s even in a test build) are written straight to the ledger,
through the store's own scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from faults.harness import (
    GRACE_MS,
    PrivateRedis,
    Server,
    call,
    confirm,
    ledger_cli,
    ledger_json,
    server_env,
    start_servers,
    status,
)

from ledger.audit.evidence import LeaseCheck, iso_ms, lease_of
from ledger.dispatch.recovery import Recoverer
from ledger.ids import new_id
from ledger.lifecycle import Lifecycle
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerSettings, LedgerStore
from schemas.ledger_events import Claimed
from schemas.send import PENDING_WARNING, PERSISTENCE_WARNING
from support.ledger import DIGEST, DISPATCHER, T0
from support.ledger_redis import claimed_send, make_store
from support.services import Services
from support.smtp_servers import ScriptedServer, server_tls
from support.smtp_sink import Transaction, transactions, wait_for_transactions

pytestmark = pytest.mark.services
TAG = uuid.uuid4().hex[:8]
# Words that must never leave the mailbox: not in the ledger, not in `show`, not in a report.
SUBJECT = f"Quarterly figures {TAG}"
BODY = f"Private body text {TAG}"
REFUSED_NOTHING = "nothing was consumed or sent"


async def prepare(url: str, rcpt: str) -> dict[str, Any]:
    """mail_prepare a message whose subject and body are recognisable (and private)."""
    body = await call(
        url,
        "mail_prepare",
        {"action": "new", "message": {"to": [rcpt], "subject": SUBJECT, "text": BODY}},
    )
    assert body.get("status") == "prepared", body
    return dict(body)


def conclusion_of(text: str) -> str:
    """The `conclusion:` line of `show`, without its label."""
    return next(line for line in text.splitlines() if line.startswith("conclusion: "))[12:]


def evidence_of(text: str) -> dict[str, str]:
    """The labelled lines of the evidence block of `show`."""
    block = text.split("\nevidence:\n", 1)[1]
    found = (
        re.fullmatch(r"  ([A-Za-z][A-Za-z0-9 _-]*):\s+(.*)", line) for line in block.split("\n")
    )
    return {match[1]: match[2] for match in found if match}


def lease_line(text: str) -> str:
    """The lease sentence of the evidence block of `show`."""
    return evidence_of(text)["lease"]


def assert_private_words_absent(*texts: str) -> None:
    for text in texts:
        assert SUBJECT not in text and BODY not in text


# ------------------------------------------------------------------------ one ordinary server


@pytest.fixture(scope="module")
def env(services: Services) -> dict[str, str]:
    return server_env(services, f"in-{TAG}")


@pytest.fixture(scope="module")
def server(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    [started] = start_servers([env], tmp_path_factory.mktemp("incidents"))
    yield started
    started.stop()


class Sent:
    """One send made through the server, and what `show` said about it afterwards."""

    def __init__(self, preview: dict[str, Any], answer: Any, env: Mapping[str, str]) -> None:
        self.pid: str = preview["prepared_id"]
        self.message_id: str = preview["message_id"]
        self.answer = answer
        shown = ledger_cli(env, "show", self.pid)
        assert shown.returncode == 0, shown.stderr
        self.text = shown.stdout
        self.view: dict[str, Any] = ledger_json(env, "show", self.pid)

    @property
    def evidence(self) -> dict[str, Any]:
        """The evidence block of `show --json`."""
        return dict(self.view["evidence"])

    def event(self, kind: str) -> dict[str, Any]:
        """The one timeline line of this type in `show --json`."""
        [line] = [line for line in self.view["events"] if line["type"] == kind]
        return dict(line)


def send(server: Server, env: Mapping[str, str], rcpt: str) -> tuple[Sent, list[Transaction]]:
    """Prepare and confirm one message, wait for the sink's record of it, then run `show`."""

    async def scenario() -> tuple[dict[str, Any], Any, list[Transaction]]:
        preview = await prepare(server.url, rcpt)
        answer = await confirm(server.url, preview)
        seen = await wait_for_transactions(lambda t: rcpt in t.rcpt_tos, within=20)
        return preview, answer, seen

    preview, answer, seen = asyncio.run(scenario())
    return Sent(preview, answer, env), seen


@pytest.fixture(scope="module")
def dropped(server: Server, env: dict[str, str]) -> tuple[Sent, list[Transaction]]:
    """The sink stores the message, then cuts the connection before its reply."""
    return send(server, env, f"drop@d{TAG}.example.test")


@pytest.fixture(scope="module")
def refused(server: Server, env: dict[str, str]) -> tuple[Sent, list[Transaction]]:
    """The sink refuses the only recipient with 550 5.1.1."""
    return send(server, env, f"rcpt-550@r{TAG}.example.test")


class TestAConnectionDroppedAfterTheServerStoredTheMessage:
    def test_the_confirm_answers_unknown(self, dropped: tuple[Sent, list[Transaction]]) -> None:
        incident, seen = dropped
        assert ("unknown", "dropped", True) == (
            incident.answer["status"], seen[0].outcome, seen[0].stored
        )  # fmt: skip

    def test_show_concludes_it_may_have_been_accepted(
        self, dropped: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, _ = dropped
        assert conclusion_of(incident.text) == (
            "end-of-data sent, reply lost: the message may have been accepted; never resend "
            "automatically"
        )
        assert incident.view["conclusion"] == conclusion_of(incident.text)

    def test_the_evidence_names_the_message_id_endpoint_and_when_it_may_have_left(
        self, dropped: tuple[Sent, list[Transaction]], services: Services
    ) -> None:
        incident, _ = dropped
        facts = evidence_of(incident.text)
        commit = incident.event("smtp_commit_point")
        endpoint = f"{services.smtp_host}:{services.smtp_port}"
        assert facts["Message-ID"] == incident.message_id
        assert facts["endpoint"].startswith(f"{endpoint} ({services.smtp_tls_mode}")
        assert facts["may have left at"].startswith(commit["server_time"])
        assert "reply lost at acknowledgement: connection_lost" == facts["outcome"]
        evidence = incident.evidence
        assert (incident.message_id, endpoint, commit["srv_ms"], "connection_lost") == (
            evidence["message_id"], evidence["endpoint"], evidence["commit_srv_ms"],
            evidence["cause"],
        )  # fmt: skip

    def test_raw_sha256_is_the_sha256_of_the_copy_the_server_stored(
        self, dropped: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, seen = dropped
        stored = hashlib.sha256(seen[0].message()).hexdigest()
        assert stored == incident.evidence["raw_sha256"]
        assert stored == evidence_of(incident.text)["raw_sha256"]
        assert stored == incident.event("smtp_commit_point")["data"]["raw_sha256"]
        assert "proves that copy is this send" in incident.evidence["raw_sha256_use"]

    def test_no_lease_is_reported_for_a_settled_send(
        self, dropped: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, _ = dropped
        assert incident.evidence.get("lease") is None
        assert "lease" not in evidence_of(incident.text)

    def test_neither_show_nor_its_json_carries_the_subject_or_body(
        self, dropped: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, seen = dropped
        assert SUBJECT.encode() in seen[0].message()  # the words were really sent
        assert_private_words_absent(incident.text, str(incident.view))


class TestRefusedRecipients:
    def test_the_confirm_answers_rejected_without_a_data_transaction(
        self, refused: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, seen = refused
        assert ("rejected", "rcpt-550", None) == (
            incident.answer["status"], seen[0].outcome, seen[0].terminator_at
        )  # fmt: skip

    def test_show_concludes_it_was_provably_not_submitted(
        self, refused: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, _ = refused
        assert conclusion_of(incident.text) == (
            "the end-of-data marker was never sent: the message was provably not submitted"
        )

    def test_the_evidence_prints_the_reply_code_and_enhanced_status(
        self, refused: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, _ = refused
        outcome = evidence_of(incident.text)["outcome"]
        assert outcome.startswith("not accepted at envelope: reply 550 5.1.1 ("), outcome
        assert (550, "5.1.1") == (
            incident.evidence["reply_code"], incident.evidence["enhanced_status"]
        )  # fmt: skip
        assert 550 == incident.event("smtp_rejected")["data"]["reply_code"]

    def test_there_is_no_commit_point_so_no_time_it_may_have_left(
        self, refused: tuple[Sent, list[Transaction]]
    ) -> None:
        incident, _ = refused
        facts = evidence_of(incident.text)
        assert "may have left at" not in facts and "raw_sha256" not in facts
        assert (None, "") == (incident.evidence["commit_srv_ms"], incident.evidence["raw_sha256"])


class TestAnOperatorResolution:
    def test_show_says_who_resolved_what_and_when(
        self, server: Server, env: dict[str, str]
    ) -> None:
        accepted, _ = send(server, env, f"ok@o{TAG}.example.test")
        note = "recipient confirmed by phone, ticket 4711"
        done = ledger_cli(
            env, "resolve", accepted.pid, "--outcome", "arrived", "--note", note, "--by", "alice"
        )
        assert 0 == done.returncode, done.stderr
        after = Sent({"prepared_id": accepted.pid, "message_id": ""}, None, env)
        line = after.event("operator_resolution")
        assert evidence_of(after.text)["resolution"] == (
            f"arrived by operator:alice at {line['server_time']}: {note}"
        )
        [resolution] = after.evidence["resolutions"]
        assert ("arrived", note, "operator:alice", line["srv_ms"]) == (
            resolution["outcome"], resolution["note"], resolution["by"], resolution["srv_ms"]
        )  # fmt: skip
        assert line["meaning"].startswith("a person's finding: arrived")
        assert conclusion_of(after.text) == conclusion_of(accepted.text)


class TestTheReport:
    def test_it_writes_one_page_with_the_message_id_and_the_outside_checks(
        self, dropped: tuple[Sent, list[Transaction]], env: dict[str, str], tmp_path: Path
    ) -> None:
        incident, _ = dropped
        path = tmp_path / "ticket.md"
        done = ledger_cli(env, "show", incident.pid, "--report", str(path))
        assert (0, f"report on {incident.pid} written to {path.resolve()}\n") == (
            done.returncode, done.stdout
        )  # fmt: skip
        page = path.read_text()
        assert page.startswith(f"# Send {incident.pid}\n")
        assert f"- **Conclusion:** {conclusion_of(incident.text)}" in page
        assert f"`{incident.message_id}`" in page
        assert incident.evidence["raw_sha256"] in page
        boxes = [line for line in page.splitlines() if line.startswith("- [ ] ")]
        assert 4 == len(boxes)
        assert any("Sent folder" in box and incident.message_id in box for box in boxes)
        assert any("SHA-256" in box and incident.evidence["raw_sha256"] in box for box in boxes)
        letter = f"we may have sent you a message with Message-ID {incident.message_id}."
        assert letter in page
        resolve = f"angelos ledger resolve {incident.pid} --outcome arrived|not-arrived|unknown"
        assert resolve in page
        for line in incident.view["events"]:
            assert f"| {line['seq']} | {line['server_time']} | {line['type']} |" in page
        assert_private_words_absent(page)

    def test_with_json_the_standard_output_stays_one_document(
        self, dropped: tuple[Sent, list[Transaction]], env: dict[str, str], tmp_path: Path
    ) -> None:
        incident, _ = dropped
        path = tmp_path / "ticket.md"
        done = ledger_cli(env, "show", incident.pid, "--report", str(path), "--json")
        assert 0 == done.returncode and path.exists()
        assert f"written to {path}" in done.stderr
        assert done.stdout.startswith("{") and done.stdout.count("\n") == 1


# ------------------------------------------------------- a server killed right after its claim


class Killed:
    """A send whose server was SIGKILLed after the claim, and `show` before and after the lease
    expired."""

    def __init__(self, env: Mapping[str, str], pid: str, first: str) -> None:
        self.pid = pid
        self.first = first  # `show` right after the kill: the lease may not have expired yet
        deadline = time.monotonic() + 30  # the lease lives SEND_DISPATCHER_LEASE_MS (1 s) on
        self.view: dict[str, Any] = ledger_json(env, "show", pid)
        while self.view["evidence"]["lease"]["alive"] and time.monotonic() < deadline:
            time.sleep(0.2)
            self.view = ledger_json(env, "show", pid)
        self.text = ledger_cli(env, "show", pid).stdout
        self.dry_run: dict[str, Any] = ledger_json(env, "recover", "--dry-run")
        [claim] = [line for line in self.view["events"] if line["type"] == "claimed"]
        self.claim = claim


@pytest.fixture(scope="module")
def killed(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Killed:
    env = server_env(services, f"ik-{TAG}", TEST_FAULT_POINT="after_claim:exit")
    [doomed] = start_servers([env], tmp_path_factory.mktemp("incidents-killed"))

    async def scenario() -> tuple[str, str]:
        preview = await prepare(doomed.url, f"k@k{TAG}.example.test")
        answer = asyncio.create_task(confirm(doomed.url, preview))
        assert await doomed.wait_state("dead", 60), doomed.log()[-2000:]
        with contextlib.suppress(Exception):  # the connection died with the server
            await asyncio.wait_for(answer, 30)
        shown = await asyncio.to_thread(ledger_cli, env, "show", preview["prepared_id"])
        return preview["prepared_id"], shown.stdout

    try:
        pid, first = asyncio.run(scenario())
    finally:
        doomed.stop()
    return Killed(env, pid, first)


class TestAServerKilledAfterItsClaim:
    def test_show_concludes_nothing_has_been_sent_so_far(self, killed: Killed) -> None:
        assert ("sending", "claimed, attempt marker absent: nothing has been sent (so far)") == (
            killed.view["status"], conclusion_of(killed.text)
        )  # fmt: skip

    def test_right_after_the_kill_the_lease_is_alive_or_already_expired(
        self, killed: Killed
    ) -> None:
        said = lease_line(killed.first)
        decidable = iso_ms(killed.claim["srv_ms"] + GRACE_MS)
        alive = re.fullmatch(
            r"alive \(expires in \d+\.\d s unless refreshed\): the claiming process is running; "
            rf"if it stops, recovery can decide at {re.escape(decidable)}",
            said,
        )
        assert alive or said == f"expired; recovery can decide at {decidable}", said

    def test_once_the_lease_expired_show_says_when_recovery_can_decide(
        self, killed: Killed
    ) -> None:
        decidable_ms = killed.claim["srv_ms"] + GRACE_MS
        assert lease_line(killed.text) == f"expired; recovery can decide at {iso_ms(decidable_ms)}"
        lease = killed.view["evidence"]["lease"]
        assert (False, decidable_ms, GRACE_MS, "claim", False) == (
            lease["alive"], lease["decidable_ms"], lease["grace_ms"], lease["grace_source"],
            lease["decidable_now"],
        )  # fmt: skip
        assert killed.claim["data"]["dispatcher_id"] == lease["dispatcher_id"]

    def test_recovery_names_the_same_time(self, killed: Killed) -> None:
        [decision] = [d for d in killed.dry_run["decisions"] if d["pid"] == killed.pid]
        assert ("too_early", killed.view["evidence"]["lease"]["decidable_ms"]) == (
            decision["action"], decision["decidable_ms"]
        )  # fmt: skip

    def test_the_evidence_has_the_message_id_and_no_endpoint(self, killed: Killed) -> None:
        facts = evidence_of(killed.text)
        assert facts["Message-ID"] == killed.view["events"][0]["data"]["message_id"]
        assert "endpoint" not in facts and "" == killed.view["evidence"]["endpoint"]


@pytest.fixture
async def store(services: Services) -> AsyncIterator[LedgerStore]:
    """A namespace of its own whose recovery waits no grace (the CLI's stays 68 s)."""
    client = connect(services.redis_url)
    namespace = f"ig-{new_id()[:12]}"
    yield make_store(client, namespace, retention_ms=604_800_000, recovery_grace_ms=0)
    keys = [key async for key in client.scan_iter(match=f"{namespace}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def cli_env(services: Services, store: LedgerStore) -> dict[str, str]:
    return server_env(services, store.settings.namespace)


class TestAClaimWrittenStraightToTheLedger:
    async def test_a_live_claiming_process_is_reported_alive(
        self, services: Services, store: LedgerStore
    ) -> None:
        pid, _ = await claimed_send(store)
        await store.refresh_lease(DISPATCHER, 60_000)  # as the claiming process does
        env = cli_env(services, store)
        view = await asyncio.to_thread(ledger_json, env, "show", pid)
        text = (await asyncio.to_thread(ledger_cli, env, "show", pid)).stdout
        [claim] = [line for line in view["events"] if line["type"] == "claimed"]
        decidable = iso_ms(claim["srv_ms"] + GRACE_MS)
        said = re.fullmatch(
            r"alive \(expires in (\d+\.\d) s unless refreshed\): the claiming process is "
            rf"running; if it stops, recovery can decide at {re.escape(decidable)}",
            lease_line(text),
        )
        assert said is not None and 0 < float(said[1]) <= 60, lease_line(text)
        lease = view["evidence"]["lease"]
        assert (True, "configured") == (lease["alive"], lease["grace_source"])
        assert 0 < lease["expires_in_ms"] <= 60_000

    async def test_after_the_grace_recovery_says_provably_never_sent(
        self, services: Services, store: LedgerStore
    ) -> None:
        pid, _ = await claimed_send(store)
        await asyncio.sleep(0.005)  # recovery takes claims older than now - grace (0)
        report = await Recoverer(store).run_once()
        assert ["classified"] == [d.action for d in report.decisions if d.pid == pid]
        env = cli_env(services, store)
        text = (await asyncio.to_thread(ledger_cli, env, "show", pid)).stdout
        view = await asyncio.to_thread(ledger_json, env, "show", pid)
        assert "status: rejected / not_attempted (written by recovery)" in text
        assert "attempt marker absent: the message was provably never sent" == conclusion_of(text)
        assert (
            "recovery classified it not_attempted (not_attempted)" == (evidence_of(text)["outcome"])
        )
        assert ("not_attempted", None) == (
            view["evidence"]["classification"], view["evidence"]["lease"]
        )  # fmt: skip


class TestTheLeaseWordsAtTheEdges:
    """The wording of `lease_of` where a real run would have to wait out the grace."""

    @staticmethod
    def claimed_at(t0: int, recorded_grace_ms: int | None = None) -> Lifecycle:
        claim = Claimed(
            dispatcher_id=DISPATCHER,
            claim_token="9" * 32,
            confirmed_digest=DIGEST,
            append_sent=False,
            **({} if recorded_grace_ms is None else {"recovery_grace_ms": recorded_grace_ms}),
        )
        return Lifecycle(state="CLAIMED", claimed=claim, claimed_srv_ms=t0)

    def test_past_the_grace_an_expired_lease_lets_recovery_decide_now(self) -> None:
        check = LeaseCheck(
            alive=False, expires_in_ms=None, configured_grace_ms=GRACE_MS, now_ms=T0 + GRACE_MS
        )
        lease = lease_of(self.claimed_at(T0), check)
        assert lease is not None and lease.decidable_now
        assert "expired; recovery can decide now: run `angelos ledger recover`" == lease.said

    def test_a_live_process_past_the_grace_is_called_stuck(self) -> None:
        check = LeaseCheck(
            alive=True, expires_in_ms=900, configured_grace_ms=GRACE_MS, now_ms=T0 + 2 * GRACE_MS
        )
        lease = lease_of(self.claimed_at(T0), check)
        assert lease is not None and lease.said.startswith(
            "alive (expires in 0.9 s unless refreshed), past the recovery grace"
        )

    def test_the_longer_of_the_recorded_and_configured_grace_decides_as_recovery_does(
        self,
    ) -> None:
        check = LeaseCheck(alive=False, expires_in_ms=None, configured_grace_ms=GRACE_MS, now_ms=T0)
        longer = lease_of(self.claimed_at(T0, recorded_grace_ms=900_000), check)
        shorter = lease_of(self.claimed_at(T0, recorded_grace_ms=1_000), check)
        assert longer is not None and shorter is not None
        assert (T0 + 900_000, "claim") == (longer.decidable_ms, longer.grace_source)
        assert (T0 + GRACE_MS, "configured") == (shorter.decidable_ms, shorter.grace_source)


# --------------------------------------------------------- a confirm after the preparation died


class Late:
    """A confirm made after its preparation expired, and what the ledger and `show` said right
    after it (a later sweep, for the other order, would record the expiry of this one too)."""

    def __init__(
        self, pid: str, rcpt: str, answer: Any, swept: Any, env: Mapping[str, str]
    ) -> None:
        self.pid, self.rcpt, self.answer, self.swept = pid, rcpt, answer, swept
        self.text = ledger_cli(env, "show", pid).stdout
        self.view: dict[str, Any] = ledger_json(env, "show", pid)
        self.types = [line["type"] for line in self.view["events"]]


ORDERS = ("before the sweeper", "after the sweeper")


@pytest.fixture(scope="module")
def late_env(services: Services) -> dict[str, str]:
    # One-second preparations; a recovery interval of 300 s puts the servers' first sweep
    # 30 s or more after the start, so only `angelos ledger recover` sweeps during the test.
    return server_env(
        services, f"ie-{TAG}", ANGELOS_TEST_PREPARE_TTL_MS="1000", SEND_RECOVERY_INTERVAL_S="300"
    )


@pytest.fixture(scope="module")
def late(
    services: Services, late_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Late]:
    [slow] = start_servers([late_env], tmp_path_factory.mktemp("incidents-late"))
    store = LedgerStore(
        connect(services.redis_url),
        LedgerSettings(namespace=late_env["SEND_LEDGER_NAMESPACE"]),
    )

    async def one(order: str) -> Late:
        rcpt = f"late{ORDERS.index(order)}@e{TAG}.example.test"
        preview = await prepare(slow.url, rcpt)
        pid = preview["prepared_id"]
        for _ in range(200):  # send_status says expired once the deadline passed
            if (await status(slow.url, pid))["status"] == "expired":
                break
            await asyncio.sleep(0.05)
        swept = None
        if order == "after the sweeper":
            swept = await asyncio.to_thread(ledger_json, late_env, "recover")
        answer = await call(
            slow.url,
            "mail_send_confirmed",
            {"prepared_id": pid, "confirmed_digest": preview["digest"], "append_sent": False},
        )
        for _ in range(200):  # the annotation is written after the answer
            _, entries = await store.read(pid)
            if "confirm_refused" in [entry.t for entry in entries]:
                break
            await asyncio.sleep(0.05)
        return await asyncio.to_thread(Late, pid, rcpt, answer, swept, late_env)

    async def both() -> dict[str, Late]:
        try:
            return {order: await one(order) for order in ORDERS}
        finally:
            await store.client.aclose()

    try:
        return asyncio.run(both())
    finally:
        slow.stop()


@pytest.mark.parametrize("order", ORDERS)
class TestAConfirmOfAnExpiredPreparation:
    def test_the_confirm_answers_expired_and_nothing_consumed_or_sent(
        self, late: dict[str, Late], order: str
    ) -> None:
        answer = late[order].answer
        assert "operation_failed" == answer["error_code"], answer
        assert "expired" in answer["error"] and REFUSED_NOTHING in answer["error"], answer

    def test_the_ledger_has_the_refusal_in_the_order_it_happened(
        self, late: dict[str, Late], order: str
    ) -> None:
        swept = order == "after the sweeper"
        expected = ["prepared", "expired", "confirm_refused"] if swept else [
            "prepared", "confirm_refused"
        ]  # fmt: skip
        assert expected == late[order].types
        if swept:
            assert {"pid": late[order].pid, "action": "expired"}.items() <= next(
                d for d in late[order].swept["decisions"] if d["pid"] == late[order].pid
            ).items()

    def test_show_has_the_confirm_refused_annotation_with_reason_expired(
        self, late: dict[str, Late], order: str
    ) -> None:
        [refusal] = [
            line for line in late[order].view["events"] if line["type"] == "confirm_refused"
        ]
        assert {"reason": "expired"} == refusal["data"]
        assert (
            "a confirm was refused (expired); nothing was consumed or sent" == (refusal["meaning"])
        )

    def test_show_concludes_nothing_was_sent(self, late: dict[str, Late], order: str) -> None:
        assert "status: expired" in late[order].text
        assert conclusion_of(late[order].text) == (
            "expired unclaimed: nothing was sent by this service"
            if order == "after the sweeper"
            else "never claimed: nothing was sent by this service"
        )
        assert [] == transactions(rcpt=late[order].rcpt)


async def settled(url: str, pid: str, within: float = 30) -> dict[str, Any]:
    """Poll send_status until the send leaves `sending` (or fail when the time is up)."""
    deadline = time.monotonic() + within
    while (answer := await status(url, pid))["status"] == "sending":
        assert time.monotonic() < deadline, f"{pid} never left sending"
        await asyncio.sleep(0.1)
    return answer


# ------------------------------------------------- a confirm answered past the tool deadline


class HeldReply(ScriptedServer):
    """An SMTP server that holds its reply to the end of the data until the test releases it
    (a reply merely slower than the tool deadline would race the test's look at the open send)."""

    def __init__(self, services: Services) -> None:
        super().__init__(server_tls(services))
        self.holding = asyncio.Event()  # the end-of-data marker has arrived
        self.release = asyncio.Event()

    async def _say(self, writer: asyncio.StreamWriter, key: str) -> bool:
        if key == "final":
            self.holding.set()
            await self.release.wait()
        return await super()._say(writer, key)


# A one-second tool deadline; a reply held for as long as the test looks (at most 60 s) still
# comes before the termination timeout. Lease 3 s, refreshed every second, so a busy machine
# does not let it lapse while the test looks at it. Grace 160 s > 90 + 3 + 60.
PENDING_TIMINGS = {
    "SEND_TOOL_DEADLINE_S": "1",
    "SMTP_DATA_TERMINATION_TIMEOUT_S": "60",
    "SEND_DISPATCH_DEADLINE_S": "90",
    "SEND_DISPATCHER_LEASE_MS": "3000",
    "SEND_DISPATCHER_LEASE_REFRESH_MS": "1000",
    "SEND_RECOVERY_GRACE_S": "160",
}


class Pending:
    """A confirm answered `sending`, `show` while the server held its reply, and after it."""

    answer: dict[str, Any]
    held: Sent  # `show` while the end-of-data reply was held
    held_status: dict[str, Any]
    done: Sent  # `show` once the send finished in the background
    done_status: dict[str, Any]
    replay: dict[str, Any]
    before_replay: list[str]  # every command the SMTP server received before the replay
    verbs: list[str]  # and after it
    terminators: int


@pytest.fixture(scope="module")
def pending(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Pending:
    seen = Pending()
    log_dir = tmp_path_factory.mktemp("incidents-pending")

    async def scenario() -> None:
        smtp = HeldReply(services)
        async with smtp:
            env = server_env(services, f"ip-{TAG}", SMTP_PORT=str(smtp.port), **PENDING_TIMINGS)
            [server] = await asyncio.to_thread(start_servers, [env], log_dir)
            try:
                preview = await prepare(server.url, f"held@p{TAG}.example.test")
                pid = preview["prepared_id"]
                seen.answer = await confirm(server.url, preview)
                await asyncio.wait_for(smtp.holding.wait(), 30)
                seen.held = await asyncio.to_thread(Sent, preview, seen.answer, env)
                seen.held_status = await status(server.url, pid)
                smtp.release.set()
                seen.done_status = await settled(server.url, pid)
                seen.done = await asyncio.to_thread(Sent, preview, seen.answer, env)
                seen.before_replay = list(smtp.verbs)
                seen.replay = await confirm(server.url, preview)
                seen.verbs, seen.terminators = list(smtp.verbs), smtp.terminators
            finally:
                smtp.release.set()
                await asyncio.to_thread(server.stop)

    asyncio.run(scenario())
    return seen


class TestAConfirmAnsweredPastTheToolDeadline:
    def test_the_confirm_answers_sending_with_the_pending_warning(self, pending: Pending) -> None:
        assert ("sending", [PENDING_WARNING]) == (
            pending.answer["status"], pending.answer["warnings"]
        )  # fmt: skip
        assert pending.held.message_id == pending.answer["message_id"]

    def test_while_the_reply_is_held_show_concludes_no_outcome_yet(self, pending: Pending) -> None:
        held = pending.held
        assert ("sending", "sending") == (held.view["status"], pending.held_status["status"])
        assert conclusion_of(held.text) == (
            "commit point present, no outcome yet: the message may have been submitted"
        )
        facts = evidence_of(held.text)
        assert "outcome" not in facts and facts["may have left at"].startswith(
            held.event("smtp_commit_point")["server_time"]
        )

    def test_while_the_reply_is_held_the_lease_of_the_claiming_process_is_alive(
        self, pending: Pending
    ) -> None:
        held = pending.held
        claim = held.event("claimed")
        lease = held.evidence["lease"]
        decidable_ms = claim["srv_ms"] + 160_000
        assert (True, decidable_ms, claim["data"]["dispatcher_id"]) == (
            lease["alive"], lease["decidable_ms"], lease["dispatcher_id"]
        )  # fmt: skip
        said = re.fullmatch(
            r"alive \(expires in (\d+\.\d) s unless refreshed\): the claiming process is "
            rf"running; if it stops, recovery can decide at {re.escape(iso_ms(decidable_ms))}",
            lease_line(held.text),
        )
        assert said is not None and 0 < float(said[1]) <= 3, lease_line(held.text)

    def test_once_it_finished_show_concludes_accepted_with_the_reply_code(
        self, pending: Pending
    ) -> None:
        done = pending.done
        assert ("accepted", "the provider accepted the message (acceptance is not delivery)") == (
            done.view["status"], conclusion_of(done.text)
        )  # fmt: skip
        facts = evidence_of(done.text)
        assert "accepted: reply 250 2.0.0" == facts["outcome"]
        assert (250, "2.0.0", None) == (
            done.evidence["reply_code"], done.evidence["enhanced_status"], done.evidence["lease"]
        )  # fmt: skip
        assert "lease" not in facts
        assert 250 == done.event("smtp_accepted")["data"]["reply_code"]

    def test_send_status_agrees_with_show(self, pending: Pending) -> None:
        assert pending.done_status["status"] == pending.done.view["status"] == "accepted"

    def test_the_smtp_server_saw_exactly_one_data_transaction(self, pending: Pending) -> None:
        assert (1, 1) == (pending.verbs.count("DATA"), pending.terminators), pending.verbs

    def test_a_second_confirm_replays_and_sends_nothing(self, pending: Pending) -> None:
        assert (False, "accepted") == (pending.replay["resent"], pending.replay["status"])
        assert pending.before_replay == pending.verbs


# ------------------------------------------- an acceptance the ledger store could not record


# The sink holds its 250 back 2 s: time to kill the store after the end of the data. The outcome
# waits 1 s for the store (the smallest persist window) before the answer goes out without it.
# Grace 70 s > 8 + 1 + 60.
UNRECORDED_TIMINGS = {
    "SEND_OUTCOME_PERSIST_WINDOW_S": "1",
    "SMTP_DATA_TERMINATION_TIMEOUT_S": "5",
    "SEND_DISPATCH_DEADLINE_S": "8",
    "SEND_RECOVERY_GRACE_S": "70",
}


class Unrecorded:
    """A confirm answered `accepted` while the store was down, and `show` once it was back."""

    rcpt: str
    answer: dict[str, Any]
    log: list[dict[str, Any]]  # the server's structlog lines (stderr), once the store was back
    back_ms: int  # when the store was started again
    shown: Sent
    final: dict[str, Any]
    replay: dict[str, Any]


def log_lines(text: str) -> list[dict[str, Any]]:
    """The server's stderr as the JSON objects structlog wrote, one a line."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def unrecorded(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Unrecorded:
    seen = Unrecorded()
    seen.rcpt = f"slow-2@w{TAG}.example.test"
    directory = tmp_path_factory.mktemp("incidents-unrecorded")
    redis = PrivateRedis(directory)
    redis.start()
    env = server_env(services, f"iw-{TAG}", ANGELOS_REDIS_URL=redis.url, **UNRECORDED_TIMINGS)

    async def scenario(server: Server) -> None:
        preview = await prepare(server.url, seen.rcpt)
        pid = preview["prepared_id"]
        sending = asyncio.create_task(confirm(server.url, preview))
        assert await wait_for_transactions(lambda t: seen.rcpt in t.rcpt_tos, within=20)
        await asyncio.to_thread(redis.kill)  # the sink has the final dot and holds its 250
        seen.answer = await asyncio.wait_for(sending, 60)
        seen.back_ms = int(time.time() * 1000)
        await asyncio.to_thread(redis.start)
        seen.final = await settled(server.url, pid)
        seen.shown = await asyncio.to_thread(Sent, preview, seen.answer, env)
        seen.replay = await confirm(server.url, preview)
        deadline = time.monotonic() + 10  # the closer logs once its write has landed
        while not any(line["event"] == "send_close_recorded" for line in seen.log):
            assert time.monotonic() < deadline, server.log()[-2000:]
            await asyncio.sleep(0.1)
            seen.log = log_lines(server.log())

    seen.log = []
    try:
        [server] = start_servers([env], directory)
        try:
            asyncio.run(scenario(server))
        finally:
            server.stop()
    finally:
        redis.stop()
    return seen


class TestAnAcceptanceTheStoreCouldNotRecord:
    def test_the_confirm_answers_accepted_with_the_persistence_warning(
        self, unrecorded: Unrecorded
    ) -> None:
        assert ("accepted", [PERSISTENCE_WARNING]) == (
            unrecorded.answer["status"], unrecorded.answer["warnings"]
        )  # fmt: skip

    def test_the_log_names_the_prepared_id_and_the_providers_answer(
        self, unrecorded: Unrecorded
    ) -> None:
        [line] = [x for x in unrecorded.log if x["event"] == "send_outcome_not_recorded_yet"]
        assert (unrecorded.shown.pid, "accepted", "critical", 250, "acknowledgement") == (
            line["pid"], line["outcome"], line["level"], line["reply_code"], line["stage"]
        )  # fmt: skip

    def test_the_log_carries_no_subject_body_or_address(
        self, unrecorded: Unrecorded, services: Services
    ) -> None:
        for line in unrecorded.log:
            text = json.dumps(line)
            assert_private_words_absent(text)
            assert unrecorded.rcpt not in text and services.mail_from not in text, text

    def test_once_the_store_answers_the_kept_outcome_is_recorded_and_show_concludes_accepted(
        self, unrecorded: Unrecorded
    ) -> None:
        shown = unrecorded.shown
        assert ("accepted", "the provider accepted the message (acceptance is not delivery)") == (
            shown.view["status"], conclusion_of(shown.text)
        )  # fmt: skip
        accepted = shown.event("smtp_accepted")
        assert accepted["srv_ms"] >= unrecorded.back_ms  # written after the store came back
        assert accepted["actor"] == shown.event("claimed")["actor"]  # by the dispatcher itself
        assert (250, "2.0.0") == (shown.evidence["reply_code"], shown.evidence["enhanced_status"])
        assert evidence_of(shown.text)["outcome"] == "accepted: reply 250 2.0.0"
        [closed] = [x for x in unrecorded.log if x["event"] == "send_close_recorded"]
        assert (shown.pid, "now") == (closed["pid"], closed["recorded"])

    def test_send_status_agrees_with_show(self, unrecorded: Unrecorded) -> None:
        assert unrecorded.final["status"] == unrecorded.shown.view["status"] == "accepted"

    def test_nothing_was_sent_twice(self, unrecorded: Unrecorded) -> None:
        assert (False, "accepted") == (unrecorded.replay["resent"], unrecorded.replay["status"])
        [sent] = transactions(rcpt=unrecorded.rcpt)
        assert ("slow", True) == (sent.outcome, sent.stored)
