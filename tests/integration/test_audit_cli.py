"""`angelos ledger` against a real Redis: verify, show,
list, export and replay, run as the operator would, with the servers' environment."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import redis.asyncio as aioredis

from ledger.audit.checks import AuditRules, audit_stream
from ledger.dispatch.recovery import Recoverer
from ledger.ids import new_id
from ledger.projection import project
from ledger.store.ledger_store import LedgerStore
from schemas.ledger import decode_event
from schemas.ledger_events import OperatorResolution
from schemas.secret import Secret
from support.angelos_process import free_port
from support.ledger import ACCEPTED, ATTEMPT, COMMIT, OWNER, QUEUED, UNKNOWN, claimed
from support.ledger_cli import (
    as_json,
    namespace_fixture,
    rewrite,
    session_redis_fixture,
    some_sends,
    store_fixture,
)
from support.ledger_cli import run_ledger as cli
from support.ledger_redis import advance, claimed_send, make_store, prepared_send
from support.services import Services

KEY = "ab" * 32
__all__ = ["namespace_fixture", "session_redis_fixture", "store_fixture"]


async def claim_ms(store: LedgerStore, pid: str) -> int:
    """The server time the send's claim (seq 2) was stored at."""
    _, entries = await store.read(pid)
    return entries[1].srv_ms


def second_after(ms: int) -> str:
    """The first whole UTC second after `ms`, as the CLI gives a decidable time."""
    return datetime.fromtimestamp(ms // 1000 + 1, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TestVerify:
    async def test_a_sound_ledger_verifies_with_exit_zero(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        await some_sends(store)
        report = as_json(done := cli(services, namespace, "verify", "--json"))
        assert 0 == done.returncode
        assert (True, 4, 14, 14) == (
            report["ok"], report["streams"], report["events"], report["index_entries"]
        )  # fmt: skip
        assert {"accepted": 1, "unknown": 1, "sending": 1, "prepared": 1} == report["statuses"]
        assert ["unknown"] == [item["status"] for item in report["investigate"]]

    async def test_one_changed_byte_in_redis_is_reported_with_pid_and_seq(
        self, services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis
    ) -> None:
        pids = await some_sends(store)
        await rewrite(client, store.keys.stream(pids["accepted"]), 3, b"tls", b"tlx")
        done = cli(services, namespace, "verify", "--json")
        report = as_json(done)
        assert 1 == done.returncode and report["ok"] is False
        assert [pids["accepted"], 3, "hash_mismatch"] in [
            [f["pid"], f["seq"], f["kind"]] for f in report["findings"]
        ]
        text = cli(services, namespace, "verify").stdout
        assert f"FINDING {pids['accepted']} seq 3: hash_mismatch" in text

    async def test_a_deleted_stream_is_reported_through_its_index_entries(
        self, services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis
    ) -> None:
        pids = await some_sends(store)
        await client.delete(store.keys.stream(pids["unknown"]))
        done = cli(services, namespace, "verify", "--json")
        assert 1 == done.returncode
        assert [pids["unknown"], 5, "missing_stream"] in [
            [f["pid"], f["seq"], f["kind"]] for f in as_json(done)["findings"]
        ]

    async def test_with_the_hmac_key_verify_passes_and_with_another_key_it_fails(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        sealed = make_store(client, namespace, hmac_key=Secret(KEY))
        await sealed.ensure_meta()
        await some_sends(sealed)
        good = cli(services, namespace, "verify", "--json", ANGELOS_LEDGER_HMAC_KEY=KEY)
        bad = cli(services, namespace, "verify", "--json", ANGELOS_LEDGER_HMAC_KEY="cd" * 32)
        keys = [key async for key in client.scan_iter(match=f"{namespace}:*")]
        await client.delete(*keys)
        assert (0, True, "checked") == (
            good.returncode, as_json(good)["ok"], as_json(good)["checked"]["macs"]
        )  # fmt: skip
        wrong = as_json(bad)
        assert (1, "wrong_key", ["mac_key_mismatch"]) == (
            bad.returncode, wrong["checked"]["macs"], [f["kind"] for f in wrong["findings"]]
        )  # fmt: skip


class TestShowAndList:
    async def test_show_tells_what_the_markers_prove(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT)
        await asyncio.sleep(0.005)  # recovery takes claims older than now - grace (0): not this ms
        await Recoverer(store).run_once()
        done = cli(services, namespace, "show", pid)
        assert (
            "attempt marker present, commit point absent: the message was provably not submitted"
        ) in done.stdout
        for kind in ("prepared", "claimed", "smtp_attempt_started", "recovery_classified"):
            assert kind in done.stdout
        assert "recovery:" in done.stdout and "status: rejected / interrupted" in done.stdout
        view = as_json(cli(services, namespace, "show", pid, "--json"))
        assert [1, 2, 3, 4] == [event["seq"] for event in view["events"]]

    async def test_show_of_an_unknown_id_says_so(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        done = cli(services, namespace, "show", new_id())
        assert 1 == done.returncode and "no ledger stream" in done.stderr

    async def test_show_catches_a_rewritten_last_event_through_the_index(
        self, services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, UNKNOWN)
        key = store.keys.stream(pid)
        await client.xdel(key, "0-5")  # the unknown outcome removed: the stream now says sending
        done = cli(services, namespace, "show", pid)
        assert 1 == done.returncode
        assert "missing_entry" in done.stdout

    async def test_show_of_a_deleted_stream_points_at_its_index_entries(
        self, services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis
    ) -> None:
        pid, _ = await claimed_send(store)
        await client.delete(store.keys.stream(pid))
        done = cli(services, namespace, "show", pid)
        assert 1 == done.returncode
        assert "its stream is gone" in done.stdout

    async def test_list_flags_a_send_whose_index_disagrees(
        self, services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis
    ) -> None:
        pids = await some_sends(store)
        await client.xdel(store.keys.stream(pids["unknown"]), "0-5")
        sending = as_json(cli(services, namespace, "list", "--status", "sending", "--json"))
        flagged = {item["prepared_id"]: item["investigate"] for item in sending["sends"]}
        assert "integrity findings" == flagged[pids["unknown"]]

    async def test_list_gives_the_incident_queue_by_status(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        pids = await some_sends(store)
        unknown = as_json(cli(services, namespace, "list", "--status", "unknown", "--json"))
        sending = as_json(
            cli(services, namespace, "list", "--status", "sending", "--since", "1h", "--json")
        )
        assert [pids["unknown"]] == [item["prepared_id"] for item in unknown["sends"]]
        assert "outcome unknown: may have been sent" == unknown["sends"][0]["investigate"]
        assert [pids["sending"]] == [item["prepared_id"] for item in sending["sends"]]
        assert [] == unknown["warnings"] == sending["warnings"]

    async def test_list_without_a_status_gives_every_send_in_a_time_range(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        await prepared_send(store)
        await asyncio.sleep(0.01)
        since = await store.server_time_ms()
        unknown, head = await claimed_send(store)
        await advance(store, unknown, head, ATTEMPT, COMMIT, UNKNOWN)
        accepted, head = await claimed_send(store)
        await advance(store, accepted, head, ATTEMPT, COMMIT, ACCEPTED)
        until = await store.server_time_ms()
        await asyncio.sleep(0.01)
        later, _ = await claimed_send(store)
        window = ("--since", str(since), "--until", str(until))
        ranged = as_json(cli(services, namespace, "list", *window, "--json"))
        onward = as_json(cli(services, namespace, "list", "--since", str(since), "--json"))
        text = cli(services, namespace, "list", *window)
        assert [(unknown, "unknown"), (accepted, "accepted")] == [
            (item["prepared_id"], item["status"]) for item in ranged["sends"]
        ]
        assert [unknown, accepted, later] == [item["prepared_id"] for item in onward["sends"]]
        assert (0, 2, "2 send(s): accepted 1, unknown 1") == (
            text.returncode, len(text.stdout.splitlines()), text.stderr.strip()
        )  # fmt: skip

    async def test_list_of_sending_sends_gives_stage_lease_and_decidable_time(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        alive = new_id()
        queued, head = await claimed_send(store, claim=claimed(dispatcher_id=alive))
        await advance(store, queued, head, QUEUED)
        await store.refresh_lease(alive, 60_000)
        attempting, head = await claimed_send(store)
        await advance(store, attempting, head, ATTEMPT)
        committed, head = await claimed_send(store)
        await advance(store, committed, head, ATTEMPT, COMMIT)
        due = {pid: await claim_ms(store, pid) + 900_000 for pid in (queued, attempting, committed)}
        listed = as_json(cli(services, namespace, "list", "--status", "sending", "--json"))
        text = cli(services, namespace, "list", "--status", "sending").stdout.splitlines()
        where = {item["prepared_id"]: item["sending"] for item in listed["sends"]}
        assert {
            queued: ("claimed, no attempt marker, waiting for a connection", True),
            attempting: ("attempt marker, no commit point", False),
            committed: ("past the commit point", False),
        } == {pid: (item["stage"], item["lease_alive"]) for pid, item in where.items()}
        assert due == {pid: item["decidable_ms"] for pid, item in where.items()}
        assert {"too_early"} == {item["recovery"] for item in where.values()}
        assert (
            "claimed, no attempt marker, waiting for a connection; lease alive; decidable at "
            + second_after(due[queued])
        ) in text[0]
        assert (
            "attempt marker, no commit point; lease gone; decidable at "
            + second_after(due[attempting])
        ) in text[1]
        assert f"3 sending: too_early 3 (first decidable at {second_after(due[queued])})" == text[3]

    async def test_list_judges_a_claim_by_the_longer_grace_it_recorded(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        pid, _ = await claimed_send(
            store,
            claim=msgspec.structs.replace(
                claimed(dispatcher_id=new_id()), recovery_grace_ms=1_800_000
            ),
        )
        listed = as_json(cli(services, namespace, "list", "--status", "sending", "--json"))
        (item,) = listed["sends"]
        assert (1_800_000, await claim_ms(store, pid) + 1_800_000) == (
            item["sending"]["grace_ms"], item["sending"]["decidable_ms"]
        )  # fmt: skip

    async def test_list_warns_about_an_indexed_send_whose_stream_is_gone(
        self, services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis
    ) -> None:
        pids = await some_sends(store)
        await client.delete(store.keys.stream(pids["unknown"]))
        done = cli(services, namespace, "list", "--json")
        listed = as_json(done)
        warning = (
            f"{pids['unknown']} is in the index but its stream is gone (deleted?): run angelos "
            "ledger verify"
        )
        assert 0 == done.returncode and [warning] == listed["warnings"]
        assert pids["unknown"] not in {item["prepared_id"] for item in listed["sends"]}
        assert f"angelos ledger: warning: {warning}" in done.stderr


class TestExportReplay:
    async def test_an_export_replays_offline_to_the_live_statuses(
        self, services: Services, store: LedgerStore, namespace: str, tmp_path: Path
    ) -> None:
        pids = await some_sends(store)
        target = tmp_path / "ledger.jsonl"
        assert 0 == cli(services, namespace, "export", "--output", str(target)).returncode
        assert 14 + 2 == len(target.read_bytes().splitlines())  # with manifest and trailer
        replayed = as_json(cli(services, namespace, "replay", str(target), "--json"))
        assert (True, 4) == (replayed["ok"], replayed["streams"])
        assert {"accepted": 1, "unknown": 1, "sending": 1, "prepared": 1} == replayed["statuses"]
        one = tmp_path / "one.jsonl"
        cli(services, namespace, "export", "--pid", pids["unknown"], "--output", str(one))
        assert 5 + 2 == len(one.read_bytes().splitlines())

    async def test_a_changed_byte_or_a_removed_line_in_the_export_is_found(
        self, services: Services, store: LedgerStore, namespace: str, tmp_path: Path
    ) -> None:
        pids = await some_sends(store)
        target = tmp_path / "ledger.jsonl"
        cli(services, namespace, "export", "--pid", pids["accepted"], "--output", str(target))
        lines = target.read_bytes().splitlines()
        edited = tmp_path / "edited.jsonl"
        edited.write_bytes(  # line 0 is the manifest: line 4 is seq 4
            b"\n".join([*lines[:4], lines[4].replace(b"wire_bytes", b"wire_bytez"), *lines[5:]])
        )
        gap = tmp_path / "gap.jsonl"
        gap.write_bytes(b"\n".join([*lines[:3], *lines[4:]]))
        changed = as_json(cli(services, namespace, "replay", str(edited), "--json"))
        missing = as_json(cli(services, namespace, "replay", str(gap), "--json"))
        assert [pids["accepted"], 4, "hash_mismatch"] in [
            [f["pid"], f["seq"], f["kind"]] for f in changed["findings"]
        ]
        assert [pids["accepted"], 4, "id_gap"] in [
            [f["pid"], f["seq"], f["kind"]] for f in missing["findings"]
        ]
        assert "export_altered" in {f["kind"] for f in changed["findings"]}
        assert "export_events_removed" in {f["kind"] for f in missing["findings"]}

    async def test_replay_as_of_a_past_time_leaves_out_what_was_stored_later(
        self, services: Services, store: LedgerStore, namespace: str, tmp_path: Path
    ) -> None:
        pid, head = await claimed_send(store)
        head = await advance(store, pid, head, ATTEMPT)
        _, entries = await store.read(pid)
        middle = str(entries[-1].srv_ms)
        await asyncio.sleep(0.01)
        await prepared_send(store)
        await advance(store, pid, head, COMMIT, ACCEPTED)
        target = tmp_path / "ledger.jsonl"
        cli(services, namespace, "export", "--output", str(target))
        then = as_json(cli(services, namespace, "replay", str(target), "--as-of", middle, "--json"))
        now = as_json(cli(services, namespace, "replay", str(target), "--json"))
        assert ({"sending": 1}, 1) == (then["statuses"], then["streams"])
        assert {"accepted": 1, "prepared": 1} == now["statuses"]

    async def test_replay_refuses_a_malformed_hmac_key_instead_of_ignoring_it(
        self, services: Services, store: LedgerStore, namespace: str, tmp_path: Path
    ) -> None:
        await some_sends(store)
        target = tmp_path / "ledger.jsonl"
        cli(services, namespace, "export", "--output", str(target))
        done = cli(services, namespace, "replay", str(target), ANGELOS_LEDGER_HMAC_KEY="abc123")
        assert 2 == done.returncode
        assert "ANGELOS_LEDGER_HMAC_KEY" in done.stderr and "" == done.stdout

    async def test_the_auditors_projection_equals_the_live_one_at_the_same_time(
        self, store: LedgerStore
    ) -> None:
        pids = await some_sends(store)
        for pid in pids.values():
            now, entries = await store.read(pid)
            live = project(entries, OWNER, now)
            replayed = audit_stream(pid, entries, AuditRules(as_of_ms=now))
            assert (live.status, live.stage if isinstance(live.stage, str) else "") == (
                replayed.status, replayed.stage
            )  # fmt: skip


class TestNoStore:
    async def test_a_ledger_command_without_a_store_says_why(
        self, services: Services, namespace: str
    ) -> None:
        done = cli(services, namespace, "verify", ANGELOS_REDIS_URL="off", MAIL_USERNAME="")
        assert 2 == done.returncode
        assert "ANGELOS_REDIS_URL=off" in done.stderr


class TestRecoverCommand:
    async def test_recover_inside_the_grace_decides_nothing(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        pid, _ = await claimed_send(store)
        dry = as_json(cli(services, namespace, "recover", "--dry-run", "--json"))
        real = as_json(cli(services, namespace, "recover", "--json"))
        assert ([pid], [pid]) == ([d["pid"] for d in dry["decisions"]],
                                  [d["pid"] for d in real["decisions"]])  # fmt: skip
        assert {"too_early": 1} == dry["counts"] == real["counts"]
        assert dry["dry_run"] is True and 900_000 == real["grace_ms"]
        now, entries = await store.read(pid)
        assert "sending" == project(entries, OWNER, now).status

    async def test_recover_dry_run_says_what_is_open_and_from_when_it_is_decidable(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        first, _ = await claimed_send(store)
        await asyncio.sleep(0.01)
        second, head = await claimed_send(store)
        await advance(store, second, head, ATTEMPT)
        due = [await claim_ms(store, pid) + 900_000 for pid in (first, second)]
        done = cli(services, namespace, "recover", "--dry-run")
        report = as_json(cli(services, namespace, "recover", "--dry-run", "--json"))
        summary, *lines = done.stdout.splitlines()
        assert (
            "dry run: nothing written (grace 900 s): too_early 2, first decidable at "
            + second_after(due[0])
        ) == summary
        assert sorted(
            [
                f"  {first} dispatch too_early after claimed, decidable at " + second_after(due[0]),
                f"  {second} dispatch too_early after smtp_attempt_started, decidable at "
                + second_after(due[1]),
            ]
        ) == sorted(lines)
        assert due[0] == report["first_decidable_ms"]
        assert sorted(due) == sorted(d["decidable_ms"] for d in report["decisions"])


class TestResolveCommand:
    async def test_resolving_an_unknown_send_puts_it_on_the_record(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        pids = await some_sends(store)
        pid = pids["unknown"]
        done = cli(
            services, namespace, "resolve", pid, "--outcome", "arrived",
            "--note", "recipient confirmed by phone, ticket 4711", "--by", "oncall",
        )  # fmt: skip
        listed = cli(services, namespace, "list", "--status", "unknown").stdout
        report = as_json(cli(services, namespace, "verify", "--json"))
        now, entries = await store.read(pid)
        assert (0, f"{pid}: resolved as arrived by operator:oncall (seq 6)") == (
            done.returncode, done.stdout.strip()
        )  # fmt: skip
        assert listed.rstrip().endswith("resolved: arrived")
        assert pid not in {item["prepared_id"] for item in report["investigate"]}
        assert [(pid, "arrived")] == [
            (item["prepared_id"], item["resolution"]) for item in report["resolved"]
        ]
        assert ("unknown", "arrived") == (
            project(entries, OWNER, now).status, project(entries, OWNER, now).resolution
        )  # fmt: skip

    async def test_resolve_refuses_an_open_send_and_writes_nothing(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT)
        done = cli(services, namespace, "resolve", pid, "--outcome", "arrived", "--note", "seen")
        _, entries = await store.read(pid)
        assert (1, 3) == (done.returncode, len(entries))
        assert "still open (ATTEMPTING)" in done.stderr and "Nothing recorded" in done.stderr

    async def test_resolve_refuses_a_sealed_ledger_without_its_key_and_writes_nothing(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        sealed = make_store(client, namespace, hmac_key=Secret(KEY))
        await sealed.ensure_meta()
        pid = (await some_sends(sealed))["unknown"]
        args = ("resolve", pid, "--outcome", "arrived", "--note", "seen")
        bare = cli(services, namespace, *args)
        other = cli(services, namespace, *args, ANGELOS_LEDGER_HMAC_KEY="cd" * 32)
        _, entries = await sealed.read(pid)
        assert (2, 2, 5) == (bare.returncode, other.returncode, len(entries))
        assert "sealed with HMAC key ID" in bare.stderr and "Nothing recorded" in bare.stderr

    @pytest.mark.parametrize("note", ['he said "yes"', "x" * 501])
    async def test_resolve_refuses_a_bad_note_before_any_store_access(
        self, services: Services, namespace: str, note: str
    ) -> None:
        closed = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
        done = cli(
            services, namespace, "resolve", new_id(), "--outcome", "unknown", "--note", note,
            ANGELOS_REDIS_URL=closed,
        )  # fmt: skip
        assert (2, "") == (done.returncode, done.stdout)
        assert "--note takes at most 500 printable ASCII characters" in done.stderr

    async def test_resolve_records_the_send_that_replaced_it(
        self, services: Services, store: LedgerStore, namespace: str
    ) -> None:
        pid, head = await claimed_send(store)
        await advance(store, pid, head, ATTEMPT, COMMIT, UNKNOWN)
        successor, _ = await prepared_send(store)
        done = cli(
            services, namespace, "resolve", pid, "--outcome", "not-arrived", "--note",
            "recipient has nothing; owner prepared it again", "--reprepared-as", successor,
            "--json",
        )  # fmt: skip
        _, entries = await store.read(pid)
        last = decode_event(entries[-1].e)
        assert (0, successor) == (done.returncode, as_json(done)["resolution"]["reprepared_as"])
        assert (
            last.actor.startswith("operator:")
            and OperatorResolution(
                outcome="not_arrived",
                note="recipient has nothing; owner prepared it again",
                reprepared_as=successor,
            )
            == last.data
        )
