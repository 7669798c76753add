"""Each tampering an auditor must catch, made against a real Redis and real exports, and the
finding `verify` or `replay` names for it; a wrong key and missing settings are no false alarm.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import msgspec
import redis.asyncio as aioredis

from ledger.audit.manifest import Binder, ExportRules, Manifest, Trailer
from ledger.chain import event_hash, event_mac, mac_key
from ledger.store.ledger_store import LedgerStore
from schemas.ledger import LedgerEntry
from schemas.ledger_events import Claimed, RecoveryClassified
from schemas.secret import Secret
from support.angelos_process import ROOT, angelos_command, clean_env
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    T0,
    UNKNOWN,
    build_events,
    claimed,
    prepared,
)
from support.ledger_cli import (
    Fields,
    as_json,
    namespace_fixture,
    rewrite_entry,
    run_ledger,
    session_redis_fixture,
)
from support.ledger_redis import DISPATCHER, advance, claimed_send, make_store, prepared_send
from support.services import Services

KEY = "ab" * 32
OTHER_KEY = "cd" * 32
__all__ = ["namespace_fixture", "session_redis_fixture"]


cli = run_ledger
report = as_json


def kinds(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [finding["kind"] for finding in report(done)["findings"]]


async def three_sends(store: LedgerStore) -> dict[str, str]:
    """An accepted, an unknown and a prepared send, written through the real scripts."""
    await store.ensure_meta()
    accepted, head = await claimed_send(store)
    await advance(store, accepted, head, ATTEMPT, COMMIT, ACCEPTED)
    unknown, head = await claimed_send(store)
    await advance(store, unknown, head, ATTEMPT, COMMIT, UNKNOWN)
    prepared, _ = await prepared_send(store)
    return {"accepted": accepted, "unknown": unknown, "prepared": prepared}


def export(services: Services, namespace: str, target: Path, **env: str) -> list[bytes]:
    done = cli(services, namespace, "export", "--output", str(target), **env)
    assert 0 == done.returncode, done.stderr
    return target.read_bytes().splitlines()


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def line_of(lines: list[bytes], pid: str, seq: int) -> int:
    for position, line in enumerate(lines):
        raw = json.loads(line)
        if raw.get("pid") == pid and raw.get("id") == f"0-{seq}":
            return position
    raise AssertionError(f"no line for {pid} seq {seq}")


def rehashed(line: bytes, old: bytes, new: bytes, key: str | None = None) -> bytes:
    """Rewrite an exported entry's event and recompute its hash (and, with the key, its MAC),
    as someone with write access and the right tools would."""
    raw = json.loads(line)
    assert old.decode() in raw["e"]
    raw["e"] = raw["e"].replace(old.decode(), new.decode(), 1)
    raw["h"] = event_hash(raw["e"].encode("ascii"))
    if key is not None:
        raw["m"] = event_mac(mac_key(key), raw["h"])
    return json.dumps(raw, separators=(",", ":")).encode()


async def sealed_export_with_a_forged_acceptance(
    services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
) -> tuple[dict[str, str], list[bytes]]:
    """Export a sealed ledger, then turn its unknown send's last event into an acceptance
    and recompute that entry's hash (the trailer left as exported)."""
    pids = await three_sends(make_store(client, namespace, hmac_key=Secret(KEY)))
    lines = export(services, namespace, tmp_path / "all.jsonl", ANGELOS_LEDGER_HMAC_KEY=KEY)
    at = line_of(lines, pids["unknown"], 5)
    line = lines[at].replace(b"smtp_outcome_unknown", b"smtp_accepted")
    lines[at] = rehashed(line, *UNKNOWN_AS_ACCEPTED)
    return pids, lines


UNKNOWN_AS_ACCEPTED = (
    b'"data":{"cause":"connection_lost","stage":"acknowledgement"}',
    b'"data":{"enhanced_status":"2.0.0","reply_code":250,"stage":"acknowledgement"}',
)


class TestInRedis:
    async def test_an_edited_event_is_a_hash_mismatch(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace)
        pids = await three_sends(store)

        def edit(fields: Fields) -> None:
            fields[b"e"] = fields[b"e"].replace(b"tls", b"tlx", 1)

        await rewrite_entry(client, store.keys.stream(pids["accepted"]), 3, edit)
        done = cli(services, namespace, "verify", "--json")
        assert 1 == done.returncode and "hash_mismatch" in kinds(done)

    async def test_a_rewritten_last_event_is_an_index_mismatch_without_the_key(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace)
        pids = await three_sends(store)

        def rewrite(fields: Fields) -> None:
            old, new = UNKNOWN_AS_ACCEPTED
            event = fields[b"e"].replace(
                b'"type":"smtp_outcome_unknown"', b'"type":"smtp_accepted"'
            )
            fields[b"e"] = event.replace(old, new)
            fields[b"t"] = b"smtp_accepted"
            fields[b"h"] = event_hash(fields[b"e"]).encode()

        await rewrite_entry(client, store.keys.stream(pids["unknown"]), 5, rewrite)
        done = cli(services, namespace, "verify", "--json")
        assert 1 == done.returncode
        assert [pids["unknown"], 5, "index_mismatch"] in [
            [f["pid"], f["seq"], f["kind"]] for f in report(done)["findings"]
        ]

    async def test_a_removed_middle_event_is_a_gap_and_a_missing_entry(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace)
        pids = await three_sends(store)
        await client.xdel(store.keys.stream(pids["accepted"]), "0-3")
        found = kinds(cli(services, namespace, "verify", "--json"))
        assert {"id_gap", "missing_entry"} <= set(found)

    async def test_a_deleted_stream_whose_index_entries_were_kept_is_missing(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace)
        pids = await three_sends(store)
        await client.delete(store.keys.stream(pids["unknown"]))
        assert "missing_stream" in kinds(cli(services, namespace, "verify", "--json"))

    async def test_a_stream_deleted_with_its_index_entries_is_left_to_the_signed_archive(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        # The limit docs/auditing.md states: full write access to Redis can remove a send
        # without a trace in Redis itself; only a copy kept elsewhere can show it.
        store = make_store(client, namespace)
        pids = await three_sends(store)
        await client.delete(store.keys.stream(pids["unknown"]))
        for entry_id, fields in await client.xrange(store.keys.index):
            if fields[b"pid"] == pids["unknown"].encode():
                await client.xdel(store.keys.index, entry_id)
        done = cli(services, namespace, "verify", "--json")
        assert (0, "verified", 2) == (
            done.returncode,
            report(done)["verdict"],
            report(done)["streams"],
        )

    async def test_a_wrong_key_is_one_finding_that_names_both_key_ids(
        self, services: Services, client: aioredis.Redis, namespace: str
    ) -> None:
        store = make_store(client, namespace, hmac_key=Secret(KEY))
        await three_sends(store)
        done = cli(services, namespace, "verify", "--json", ANGELOS_LEDGER_HMAC_KEY=OTHER_KEY)
        answer = report(done)
        assert (1, ["mac_key_mismatch"], "wrong_key") == (
            done.returncode, kinds(done), answer["checked"]["macs"]
        )  # fmt: skip
        detail = answer["findings"][0]["detail"]
        assert (
            answer["checked"]["sealed_key_id"] in detail and answer["checked"]["key_id"] in detail
        )
        assert "not a forgery" in detail


class TestInExports:
    async def test_an_edited_line_is_a_hash_mismatch_and_breaks_the_trailer(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        pids = await three_sends(make_store(client, namespace))
        lines = export(services, namespace, tmp_path / "all.jsonl")
        at = line_of(lines, pids["accepted"], 1)
        lines[at] = lines[at].replace(b'recipient_count\\":2', b'recipient_count\\":3')
        done = cli(services, namespace, "replay", str(write(tmp_path / "x.jsonl", lines)), "--json")
        assert 1 == done.returncode
        assert {"hash_mismatch", "export_altered"} <= set(kinds(done))

    async def test_a_removed_middle_line_is_a_gap_and_a_removed_event(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        pids = await three_sends(make_store(client, namespace))
        lines = export(services, namespace, tmp_path / "all.jsonl")
        del lines[line_of(lines, pids["unknown"], 3)]
        done = cli(services, namespace, "replay", str(write(tmp_path / "x.jsonl", lines)), "--json")
        assert {"id_gap", "export_events_removed"} <= set(kinds(done))

    async def test_a_whole_send_removed_from_an_export_is_named_as_such(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        pids = await three_sends(make_store(client, namespace))
        lines = export(services, namespace, tmp_path / "all.jsonl")
        kept = [line for line in lines if pids["unknown"].encode() not in line]
        done = cli(services, namespace, "replay", str(write(tmp_path / "x.jsonl", kept)), "--json")
        answer = report(done)
        assert (1, ["export_send_removed"]) == (done.returncode, kinds(done))
        assert "3 send(s); 2 remain" in answer["findings"][0]["detail"]

    async def test_a_cut_last_line_is_a_truncated_export(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        pids = await three_sends(make_store(client, namespace))
        lines = export(services, namespace, tmp_path / "all.jsonl")
        done = cli(
            services, namespace, "replay", str(write(tmp_path / "x.jsonl", lines[:-1])), "--json"
        )
        assert (1, ["export_truncated"]) == (done.returncode, kinds(done))
        del lines[line_of(lines, pids["unknown"], 5)]  # a send's last event gone, trailer kept
        done = cli(services, namespace, "replay", str(write(tmp_path / "y.jsonl", lines)), "--json")
        assert ["export_events_removed"] == kinds(done)

    async def test_a_rewritten_last_event_is_caught_by_the_key_and_unverified_without_it(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        pids, lines = await sealed_export_with_a_forged_acceptance(
            services, client, namespace, tmp_path
        )
        forged = write(tmp_path / "forged.jsonl", lines)
        keyless = cli(services, namespace, "replay", str(forged), "--json")
        keyless_text = cli(services, namespace, "replay", str(forged))
        keyed = cli(
            services, namespace, "replay", str(forged), "--json", ANGELOS_LEDGER_HMAC_KEY=KEY
        )
        # Without the key the trailer's hash still tells the line changed; with the key the
        # forged entry itself is named.
        assert "export_altered" in kinds(keyless)
        assert "not_checked" == report(keyless)["checked"]["macs"]
        assert "MACs: NOT checked" in keyless_text.stdout
        assert [pids["unknown"], 5, "mac_mismatch"] in [
            [f["pid"], f["seq"], f["kind"]] for f in report(keyed)["findings"]
        ]

    async def test_a_rehashed_export_with_a_recomputed_trailer_is_unverified_without_the_key(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        _, lines = await sealed_export_with_a_forged_acceptance(
            services, client, namespace, tmp_path
        )
        lines[-1] = recomputed_trailer(lines)
        forged = write(tmp_path / "forged.jsonl", lines)
        keyless = cli(services, namespace, "replay", str(forged))
        keyed = cli(
            services, namespace, "replay", str(forged), "--json", ANGELOS_LEDGER_HMAC_KEY=KEY
        )
        assert 4 == keyless.returncode
        assert keyless.stdout.rstrip().endswith("unverified (MACs not checked)")
        assert "verified: no findings" not in keyless.stdout
        assert {"mac_mismatch", "export_mac_mismatch"} <= set(kinds(keyed))

    async def test_a_send_removed_with_a_recomputed_trailer_is_caught_by_the_key(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        pids = await three_sends(make_store(client, namespace, hmac_key=Secret(KEY)))
        lines = export(services, namespace, tmp_path / "all.jsonl", ANGELOS_LEDGER_HMAC_KEY=KEY)
        kept = [line for line in lines if pids["unknown"].encode() not in line]
        manifest = json.loads(kept[0])
        manifest["streams"] -= 1
        kept[0] = json.dumps(manifest, separators=(",", ":")).encode()
        kept[-1] = recomputed_trailer(kept)
        forged = write(tmp_path / "forged.jsonl", kept)
        keyed = cli(
            services, namespace, "replay", str(forged), "--json", ANGELOS_LEDGER_HMAC_KEY=KEY
        )
        keyless = cli(services, namespace, "replay", str(forged), "--json")
        assert ["export_mac_mismatch"] == kinds(keyed)
        assert (4, "unverified") == (keyless.returncode, report(keyless)["verdict"])

    async def test_a_sealed_ledger_is_not_exported_without_its_key(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        await three_sends(make_store(client, namespace, hmac_key=Secret(KEY)))
        target = tmp_path / "x.jsonl"
        bare = cli(services, namespace, "export", "--output", str(target))
        other = cli(
            services,
            namespace,
            "export",
            "--output",
            str(target),
            ANGELOS_LEDGER_HMAC_KEY=OTHER_KEY,
        )
        assert (2, 2) == (bare.returncode, other.returncode)
        assert "sealed with HMAC key ID" in bare.stderr and not target.exists()

    async def test_a_wrong_key_is_told_apart_from_a_forgery(
        self, services: Services, client: aioredis.Redis, namespace: str, tmp_path: Path
    ) -> None:
        await three_sends(make_store(client, namespace, hmac_key=Secret(KEY)))
        lines = export(services, namespace, tmp_path / "all.jsonl", ANGELOS_LEDGER_HMAC_KEY=KEY)
        path = write(tmp_path / "x.jsonl", lines)
        wrong = cli(
            services, namespace, "replay", str(path), "--json", ANGELOS_LEDGER_HMAC_KEY=OTHER_KEY
        )
        assert (["mac_key_mismatch"], "wrong_key") == (
            kinds(wrong),
            report(wrong)["checked"]["macs"],
        )
        # An export from before manifests: every MAC failing is read as the wrong key too.
        legacy = write(tmp_path / "legacy.jsonl", lines[1:-1])
        old = cli(
            services, namespace, "replay", str(legacy), "--json", ANGELOS_LEDGER_HMAC_KEY=OTHER_KEY
        )
        assert ["mac_key_mismatch"] == kinds(old)
        right = cli(
            services, namespace, "replay", str(legacy), "--json", ANGELOS_LEDGER_HMAC_KEY=KEY
        )
        checked = report(right)["checked"]
        assert (0, "checked", "not_checked") == (
            right.returncode, checked["macs"], checked["completeness"]
        )  # fmt: skip


def recomputed_trailer(lines: list[bytes]) -> bytes:
    """The trailer someone without the key can recompute: counts and hash, the old MAC kept."""
    body = lines[:-1]
    trailer = json.loads(lines[-1])
    digest = hashlib.sha256(b"".join(line + b"\n" for line in body)).hexdigest()
    entries = [json.loads(line) for line in body[1:]]
    trailer.update(
        sha256=digest,
        lines=len(entries),
        events=sum(1 for raw in entries if "e" in raw),
        streams=len({raw["pid"] for raw in entries}),
    )
    return json.dumps(trailer, separators=(",", ":")).encode()


RECOVERED = RecoveryClassified(
    classification="not_submitted", stage="interrupted", claim_age_ms=70_000,
    last_lifecycle_type="smtp_attempt_started",
)  # fmt: skip


def recovered_after_70_s(pid: str, claim: Claimed) -> list[LedgerEntry]:
    """A send whose claim recovery closed 70 s later, as the store would have kept it."""
    items = [prepared(), claim, ATTEMPT, RECOVERED]
    times = [T0, T0 + 10, T0 + 20, T0 + 10 + 70_000]
    actors = ["api:test-1", DISPATCHER, DISPATCHER, "recovery:worker-1"]
    entries = []
    for (event, e, h), when in zip(
        build_events(items, pid=pid, actors=actors, at_ms=times), times, strict=True
    ):
        entries.append(
            LedgerEntry(
                pid=pid,
                id=f"0-{event.seq}",
                e=e.decode(),
                h=h,
                t=event.type,
                eid=event.eid,
                srv_ms=when,
            )
        )
    return entries


def export_file(path: Path, entries: list[LedgerEntry], grace_ms: int | None) -> Path:
    """Write entries as an export: with a manifest and trailer naming `grace_ms`, or without
    (an export made before manifests existed) when it is None."""
    encode = msgspec.json.encode
    body = [encode(entry) for entry in entries]
    if grace_ms is None:
        return write(path, body)
    manifest = Manifest(
        namespace="angelos", exported_ms=T0 + 100_000, streams=len({e.pid for e in entries}),
        index_entries=len(entries),
        rules=ExportRules(recovery_grace_ms=grace_ms, retention_ms=604_800_000),
    )  # fmt: skip
    lines = [encode(manifest), *body]
    binder = Binder()
    for line in lines:
        binder.add(line)
    trailer = Trailer(
        lines=len(body), streams=manifest.streams, events=len(body), missing=0,
        sha256=binder.hexdigest(),
    )  # fmt: skip
    return write(path, [*lines, encode(trailer)])


class TestRulesTravelWithTheLedger:
    def test_a_grace_recorded_at_the_claim_is_the_one_recovery_is_judged_by(
        self, services: Services, tmp_path: Path
    ) -> None:
        recorded = msgspec.structs.replace(claimed(), recovery_grace_ms=68_000)
        entries = recovered_after_70_s("a" * 32, recorded)
        entries += recovered_after_70_s("b" * 32, claimed())  # a claim from before it was recorded
        here = {"SEND_RECOVERY_GRACE_S": "900"}  # the auditor's machine has another grace
        legacy = cli(
            services,
            "x",
            "replay",
            str(export_file(tmp_path / "old.jsonl", entries, None)),
            "--json",
            "--as-of",
            str(T0 + 200_000),
            **here,
        )
        assert [["b" * 32, "recovery_early"]] == [
            [f["pid"], f["kind"]] for f in report(legacy)["findings"]
        ]
        grace = report(legacy)["checked"]["rules"][0]
        assert ("recovery_grace_ms", 900_000, "environment", 2) == (
            grace["name"], grace["value_ms"], grace["source"], grace["recorded_sends"] + 1
        )  # fmt: skip

    def test_the_manifest_carries_the_servers_grace_to_another_machine(
        self, services: Services, tmp_path: Path
    ) -> None:
        entries = recovered_after_70_s("b" * 32, claimed())
        path = export_file(tmp_path / "new.jsonl", entries, 68_000)
        done = cli(
            services,
            "x",
            "replay",
            str(path),
            "--json",
            "--as-of",
            str(T0 + 200_000),
            SEND_RECOVERY_GRACE_S="900",
        )
        assert (0, [], "verified") == (done.returncode, kinds(done), report(done)["verdict"])
        grace = report(done)["checked"]["rules"][0]
        assert (68_000, "manifest") == (grace["value_ms"], grace["source"])


class TestAuditorPreflight:
    def test_check_config_for_the_ledger_alone_needs_no_mailbox(self, tmp_path: Path) -> None:
        env = clean_env({"HOME": str(tmp_path), "SEND_RECOVERY_GRACE_S": "900"})
        done = subprocess.run(
            angelos_command("check-config", "--ledger-only"),
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert 0 == done.returncode, done.stdout
        assert "SEND_RECOVERY_GRACE_S = 900" in done.stdout and "IMAP_HOST" not in done.stdout
        assert done.stdout.rstrip().endswith("No problems found.")

    def test_check_config_for_the_ledger_alone_still_refuses_a_malformed_key(
        self, tmp_path: Path
    ) -> None:
        env = clean_env({"HOME": str(tmp_path), "ANGELOS_LEDGER_HMAC_KEY": "abc"})
        done = subprocess.run(
            angelos_command("check-config", "--ledger-only"),
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert 1 == done.returncode
        assert "ANGELOS_LEDGER_HMAC_KEY: must be 64 hex characters" in done.stdout
        assert "abc" not in done.stdout.replace("ANGELOS_LEDGER_HMAC_KEY", "")
