"""The signed archive against the session's real Redis: exactly once, faults, tampering.

Each test archives a real ledger (written through the store's scripts) with the operator's
command, `angelos ledger archive --once`, damages the archive or the store the way the fault
names, and asserts the finding `angelos ledger verify --archive` reports, naming what was lost
or changed. The clean case has zero findings.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aics_tlog
import pytest
import redis.asyncio as aioredis
from faults.harness import call, private_redis

from ledger.archive import records
from ledger.archive.segments import list_checkpoints, list_segments
from ledger.archive.signed_note import SignerKey, VerifierKey, generate_key, open_note, sign
from ledger.store.connection import connect
from ledger.store.ledger_store import LedgerStore
from support.angelos_process import ROOT, angelos_command, clean_env, http_server
from support.ledger import ACCEPTED, ATTEMPT, COMMIT
from support.ledger_cli import (
    as_json,
    namespace_fixture,
    run_ledger,
    session_redis_fixture,
    some_sends,
    store_fixture,
)
from support.ledger_redis import advance, claimed_send, make_store
from support.services import Services

pytestmark = pytest.mark.services
__all__ = ["namespace_fixture", "session_redis_fixture", "store_fixture"]

LOCAL_OWNER = ("--insecure-local-owner", "archive-owner")
FAULT_ENTRY = ROOT / "tests" / "faults" / "archive_fault.py"


class Keys:
    """One signer key for the archiving server and its public key for the auditor."""

    def __init__(self, name: str = "angelos-audit") -> None:
        signer, verifier = generate_key(name)
        self.signer = signer.text()
        self.public = verifier.text()


@pytest.fixture(name="keys", scope="module")
def keys_fixture() -> Keys:
    return Keys()


@pytest.fixture(name="archive_dir")
def archive_dir_fixture(tmp_path: Path) -> Path:
    return tmp_path / "archive"


def archive_env(keys: Keys, archive_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "ANGELOS_LEDGER_ARCHIVE_DIR": str(archive_dir),
        "ANGELOS_AUDIT_SIGNING_KEY": keys.signer,
        **extra,
    }


def archive_once(
    services: Services, namespace: str, keys: Keys, archive_dir: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    return run_ledger(
        services, namespace, "archive", "--once", **archive_env(keys, archive_dir, **extra)
    )


def verify(
    services: Services, namespace: str, keys: Keys, archive_dir: Path, *more: str, **env: str
) -> tuple[int, dict[str, Any]]:
    done = run_ledger(
        services, namespace, "verify", "--archive", str(archive_dir), "--public-key",
        keys.public, "--json", "--quiet", *more, **env,
    )  # fmt: skip
    return done.returncode, as_json(done)


def run_killed(settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `ledger archive --once` through the fault entry point (it SIGKILLs itself)."""
    return subprocess.run(
        [angelos_command()[0], str(FAULT_ENTRY), "ledger", "archive", "--once"],
        env=clean_env(settings), cwd=ROOT, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def run_bare(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one ledger command with exactly `env` (no test variables at all)."""
    return subprocess.run(
        angelos_command("ledger", *args), env=env, cwd=cwd, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def kinds(report: dict[str, Any]) -> list[str]:
    return [finding["kind"] for finding in report["findings"]]


def archived(archive_dir: Path) -> list[records.Record]:
    found = []
    for segment in list_segments(archive_dir):
        for line in segment.path.read_bytes().split(b"\n"):
            if line:
                found.append(records.decode(line))
    return found


async def index_ids(client: aioredis.Redis, store: LedgerStore) -> list[str]:
    return [entry_id.decode() for entry_id, _ in await client.xrange(store.keys.index)]


def event_ixs(found: list[records.Record]) -> list[str]:
    return [r.ix for r in found if not isinstance(r, records.RulesRecord)]


# --- the clean case and exactly once ---------------------------------------------------------


async def test_a_clean_archive_verifies_with_zero_findings(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    sends = await some_sends(store)
    done = archive_once(services, namespace, keys, archive_dir)
    assert 0 == done.returncode, done.stderr
    code, report = verify(services, namespace, keys, archive_dir)
    assert [] == report["findings"]
    assert 0 == code
    assert "verified" == report["verdict"]
    assert "checked" == report["checked"]["archive"]["live"]
    assert len(sends) == report["streams"]
    # Every index entry archived exactly once, in index order, after one rules record.
    found = archived(archive_dir)
    assert isinstance(found[0], records.RulesRecord)
    assert await index_ids(client, store) == event_ixs(found)
    assert list(range(len(found))) == [r.n for r in found]
    assert report["checked"]["archive"]["signed_records"] == len(found)


async def test_a_second_run_appends_only_what_is_new(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    first = archived(archive_dir)
    pid, head = await claimed_send(store)
    await advance(store, pid, head, ATTEMPT, COMMIT, ACCEPTED)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    found = archived(archive_dir)
    assert first == found[: len(first)]
    assert await index_ids(client, store) == event_ixs(found)
    assert 2 == len(list_checkpoints(archive_dir))
    code, report = verify(services, namespace, keys, archive_dir)
    assert ([], 0) == (report["findings"], code)


async def test_unarchived_streams_keep_no_ttl_and_archived_ones_get_it_back(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    before, before_head = await claimed_send(store)
    assert await client.pttl(store.keys.stream(before)) > 0  # no archive yet: the retention
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    assert await client.pttl(store.keys.stream(before)) > 0  # archived: the retention again
    pid, _ = await claimed_send(store)
    assert -1 == await client.pttl(store.keys.stream(pid))  # unarchived: kept
    await advance(store, before, before_head, ATTEMPT)
    assert -1 == await client.pttl(store.keys.stream(before))
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    for one in (before, pid):
        assert await client.pttl(store.keys.stream(one)) > 0
    assert (await client.hget(store.keys.meta, "archive_pos")) is not None


async def test_two_archivers_never_write_at_once(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    await some_sends(store)
    await client.set(store.keys.archive_lease, "someone-else", px=30_000)
    done = archive_once(services, namespace, keys, archive_dir)
    assert 1 == done.returncode
    assert "another archiver holds the lease" in done.stderr
    assert [] == list_segments(archive_dir)


# --- a kill at every step of the archiver ---------------------------------------------------


@pytest.mark.parametrize(
    "point", ["fetched", "written", "synced", "advanced", "checkpointed", "written:2"]
)
async def test_a_kill_at_each_step_resumes_with_no_gap_and_no_duplicate(
    point: str, services: Services, namespace: str, store: LedgerStore, keys: Keys,
    archive_dir: Path, client: aioredis.Redis,
) -> None:  # fmt: skip
    await some_sends(store)
    if point == "written:2":  # the second batch: the kill lands after a first checkpoint
        assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
        await some_sends(store)
        point = "written"
    settings = {**services.product_env, "SEND_LEDGER_NAMESPACE": namespace,
                **archive_env(keys, archive_dir), "TEST_ARCHIVE_POINT": point}  # fmt: skip
    killed = run_killed(settings)
    assert -9 == killed.returncode, killed.stderr
    resumed = archive_once(services, namespace, keys, archive_dir)
    assert 0 == resumed.returncode, resumed.stderr
    found = archived(archive_dir)
    assert await index_ids(client, store) == event_ixs(found)  # each once, in order
    assert list(range(len(found))) == [r.n for r in found]
    code, report = verify(services, namespace, keys, archive_dir)
    assert ([], 0) == (report["findings"], code)


async def test_a_torn_last_record_is_a_finding_until_the_archiver_cuts_it(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
) -> None:  # fmt: skip
    await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    last = list_segments(archive_dir)[-1].path
    with last.open("ab") as handle:
        handle.write(b'{"r":"event","n":')  # a write the power cut stopped half way
    code, report = verify(services, namespace, keys, archive_dir)
    assert ["archive_truncated"] == kinds(report)
    assert 1 == code
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    code, report = verify(services, namespace, keys, archive_dir)
    assert ([], 0) == (report["findings"], code)


# --- tampering with the store or the archive ------------------------------------------------


async def test_a_stream_deleted_with_its_index_entries_is_named(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    sends = await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    gone = sends["accepted"]
    await client.delete(store.keys.stream(gone))
    for entry_id, fields in await client.xrange(store.keys.index):
        if fields[b"pid"] == gone.encode():
            await client.xdel(store.keys.index, entry_id)
    redis_only = run_ledger(services, namespace, "verify", "--json", "--quiet")
    assert [] == as_json(redis_only)["findings"]  # Redis alone cannot see it
    code, report = verify(services, namespace, keys, archive_dir)
    assert 1 == code
    assert [("live_stream_gone", gone)] == [(f["kind"], f["pid"]) for f in report["findings"]]


async def test_an_event_changed_live_after_archiving_is_named(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    sends = await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    key = store.keys.stream(sends["unknown"])
    items = await client.xrange(key)
    await client.delete(key)
    for entry_id, fields in items[:-1]:  # the last event rewritten away: "unknown" vanishes
        await client.xadd(key, fields, id=entry_id)
    code, report = verify(services, namespace, keys, archive_dir)
    assert 1 == code
    assert ("live_event_gone", sends["unknown"], len(items)) in [
        (f["kind"], f["pid"], f["seq"]) for f in report["findings"]
    ]


async def test_a_truncated_segment_is_named(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
) -> None:  # fmt: skip
    await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    segment = list_segments(archive_dir)[-1].path
    lines = segment.read_bytes().split(b"\n")
    segment.write_bytes(b"\n".join(lines[:3]) + b"\n")  # whole records cut off the end
    code, report = verify(services, namespace, keys, archive_dir, "--offline")
    assert 1 == code
    assert ["archive_truncated"] == kinds(report)
    assert "the archive holds 3" in report["findings"][0]["detail"]


async def test_two_swapped_segments_are_named(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
) -> None:  # fmt: skip
    for _ in range(3):
        await some_sends(store)
        small = {"ANGELOS_ALLOW_FAULT_INJECTION": "1", "ANGELOS_ENV": "test",
                 "ANGELOS_LEDGER_ARCHIVE_SEGMENT_BYTES": "256"}  # fmt: skip
        assert 0 == archive_once(services, namespace, keys, archive_dir, **small).returncode
    segments = list_segments(archive_dir)
    assert len(segments) >= 3
    a, b = segments[0].path, segments[1].path
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    code, report = verify(services, namespace, keys, archive_dir, "--offline")
    assert 1 == code
    assert "archive_out_of_sequence" in kinds(report)
    assert any(a.name in f["detail"] for f in report["findings"])


async def test_a_checkpoint_signed_by_another_key_is_named(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
) -> None:  # fmt: skip
    await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    other = Keys("angelos-audit")  # the same name, another key
    _, path = list_checkpoints(archive_dir)[-1]
    body = open_note(path.read_bytes(), VerifierKey.parse(keys.public))
    path.write_bytes(sign(body, SignerKey.parse(other.signer)))
    code, report = verify(services, namespace, keys, archive_dir, "--offline")
    assert 1 == code
    assert "checkpoint_not_signed" in kinds(report)
    assert path.name in report["findings"][0]["detail"]


async def test_an_archive_rolled_back_while_redis_moved_on_is_named(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    older = tmp_path / "older"
    shutil.copytree(archive_dir, older)
    kept_checkpoint = tmp_path / "seen.note"
    later = await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    shutil.copy(list_checkpoints(archive_dir)[-1][1], kept_checkpoint)
    shutil.rmtree(archive_dir)
    shutil.copytree(older, archive_dir)  # consistent with itself, signed, and old
    offline_code, offline = verify(services, namespace, keys, archive_dir, "--offline")
    assert ([], 0) == (offline["findings"], offline_code)  # nothing to hold it against
    code, report = verify(services, namespace, keys, archive_dir)
    assert 1 == code
    assert "archive_behind_store" in kinds(report)
    lost = {f["pid"] for f in report["findings"] if f["kind"] == "live_not_archived"}
    assert set(later.values()) == lost
    code, report = verify(
        services, namespace, keys, archive_dir, "--offline", "--since-checkpoint",
        str(kept_checkpoint),
    )  # fmt: skip
    assert ["archive_rolled_back"] == kinds(report)
    refused = archive_once(services, namespace, keys, archive_dir)
    assert 1 == refused.returncode
    assert "the archive lost records" in refused.stderr


async def test_an_archive_verifies_on_a_machine_with_no_ledger_variables(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    public = tmp_path / "audit.pub"
    public.write_text(keys.public + "\n")
    home = tmp_path / "home"
    home.mkdir()
    bare = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR")}
    done = run_bare(
        {**bare, "HOME": str(home), "PYTHONPATH": str(ROOT)}, tmp_path,
        "verify", "--archive", str(archive_dir), "--public-key", str(public), "--json", "--quiet",
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert [] == report["findings"]
    assert 0 == done.returncode, done.stderr
    assert report["checked"]["archive"]["live"].startswith("no ANGELOS_REDIS_URL")
    assert {"ledger"} == {rule["source"] for rule in report["checked"]["rules"][:2]}
    assert not (home / ".local").exists()  # no embedded store was started for it


async def test_show_proves_each_record_and_an_independent_verifier_agrees(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
) -> None:  # fmt: skip
    sends = await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    pid = sends["accepted"]
    done = run_ledger(services, namespace, "show", pid, "--json", **archive_env(keys, archive_dir))
    inclusion = as_json(done)["inclusion"]
    assert inclusion["signature"].startswith("verified under angelos-audit")
    _, path = list_checkpoints(archive_dir)[-1]
    note = aics_tlog.parse_note(path.read_bytes())
    result = aics_tlog.verify_checkpoint(note, aics_tlog.parse_vkey(keys.public))
    assert result.ok, result.error
    checkpoint = aics_tlog.parse_checkpoint(note.text)
    assert base64.b64encode(checkpoint.root).decode() == inclusion["root"]
    assert checkpoint.size == inclusion["tree_size"]
    proofs = inclusion["records"]
    assert [1, 2, 3, 4, 5] == [proof["seq"] for proof in proofs]  # prepared .. smtp_accepted
    lines = [line for s in list_segments(archive_dir) for line in s.path.read_bytes().split(b"\n")]
    for proof in proofs:
        leaf = lines[proof["leaf_index"]]
        assert pid.encode() in leaf
        assert aics_tlog.verify_leaf_inclusion(
            leaf, proof["leaf_index"], checkpoint.size,
            [base64.b64decode(step) for step in proof["proof"]], checkpoint.root,
        )  # fmt: skip
        assert proof["verified"]
    text = run_ledger(services, namespace, "show", pid, **archive_env(keys, archive_dir))
    assert f"checkpoint {path.name}" in text.stdout
    assert text.stdout.count(" proved by ") == len(proofs)


# --- serve: the archiver in the background, and how far behind it is -----------------------


def healthz_archive(base: str, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll /healthz until its ledger_archive part satisfies `until` (10 s at most)."""
    deadline = time.monotonic() + 10
    while True:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
            body = json.loads(answer.read())
        status = body.get("sending", {}).get("ledger_archive")
        if status is not None and until(status):
            return dict(status)
        assert time.monotonic() < deadline, body
        time.sleep(0.2)


async def test_serve_archives_in_the_background_and_healthz_says_how_far(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
) -> None:  # fmt: skip
    sends = await some_sends(store)
    env = {**services.product_env, "SEND_LEDGER_NAMESPACE": namespace,
           "ANGELOS_ALLOW_FAULT_INJECTION": "1", "ANGELOS_ENV": "test",
           "ANGELOS_LEDGER_ARCHIVE_CHECKPOINT_S": "1", "ANGELOS_LOCAL_SCOPES": "mail.read",
           **archive_env(keys, archive_dir)}  # fmt: skip
    with http_server(env, *LOCAL_OWNER) as base:
        status = await asyncio.to_thread(
            healthz_archive, base, lambda s: s["behind_events"] == 0 and s["records"] > 0
        )
        assert "archiving" == status["state"]
        assert 0 == status["behind_ms"]
        assert "kept until archived" in status["retention"]
        status = await asyncio.to_thread(
            healthz_archive, base, lambda s: s["last_checkpoint_size"] == s["records"]
        )
        answer = await call(f"{base}/mcp", "mail_query", {"action": "capabilities"})
        assert "archiving" == answer["ledger_archive"]["state"]
        assert status["records"] <= answer["ledger_archive"]["records"]
    found = archived(archive_dir)
    assert len(found) == status["records"]
    assert set(sends.values()) <= {r.pid for r in found if isinstance(r, records.EventRecord)}
    code, report = verify(services, namespace, keys, archive_dir)
    assert ([], 0) == (report["findings"], code)


async def test_healthz_says_by_how_much_an_archiver_elsewhere_is_behind(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    await some_sends(store)
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    await some_sends(store)  # 4 sends, 13 index entries the archiver has not taken
    waiting = len(await index_ids(client, store)) - len(event_ixs(archived(archive_dir)))
    env = {**services.product_env, "SEND_LEDGER_NAMESPACE": namespace,
           "ANGELOS_LOCAL_SCOPES": "mail.read"}  # fmt: skip
    with http_server(env, *LOCAL_OWNER) as base:
        status = await asyncio.to_thread(healthz_archive, base, lambda s: True)
    assert "elsewhere" == status["state"]
    assert waiting == status["behind_events"] > 0
    assert status["behind_ms"] > 0
    assert not status["behind_more"]


def test_a_bad_archive_setting_is_refused_before_any_store_access(
    services: Services, keys: Keys, tmp_path: Path
) -> None:
    closed = "redis://127.0.0.1:1/0"  # nothing listens: any store access would say so (exit 3)
    relative = run_ledger(services, "unused", "archive", "--once", "--dir", "relative/dir",
                          ANGELOS_AUDIT_SIGNING_KEY=keys.signer, ANGELOS_REDIS_URL=closed)
    assert (2, "angelos ledger: the archive directory must be an absolute path\n") == (
        relative.returncode, relative.stderr)  # fmt: skip
    unsigned = run_ledger(services, "unused", "archive", "--once", "--dir", str(tmp_path),
                          ANGELOS_REDIS_URL=closed)  # fmt: skip
    assert 2 == unsigned.returncode
    assert "ANGELOS_AUDIT_SIGNING_KEY is not set" in unsigned.stderr
    malformed = run_ledger(services, "unused", "archive", "--once",
                           ANGELOS_LEDGER_ARCHIVE_DIR=str(tmp_path),
                           ANGELOS_AUDIT_SIGNING_KEY=keys.signer[:-2] + "!!",
                           ANGELOS_REDIS_URL=closed)  # fmt: skip
    assert 2 == malformed.returncode
    assert "ANGELOS_AUDIT_SIGNING_KEY: must be a signer key" in malformed.stderr
    assert keys.signer[20:] not in malformed.stderr  # the secret is never echoed
    bad_key = run_ledger(services, "unused", "verify", "--archive", str(tmp_path),
                         "--public-key", "not+a+key", ANGELOS_REDIS_URL=closed)  # fmt: skip
    assert 2 == bad_key.returncode
    assert "--public-key" in bad_key.stderr
    assert [] == list(tmp_path.iterdir())  # nothing was written either


async def test_serve_keeps_archiving_after_its_redis_restarts(
    services: Services, keys: Keys, archive_dir: Path, tmp_path: Path
) -> None:
    namespace = "archive-restart"
    (tmp_path / "redis").mkdir()
    with private_redis(tmp_path / "redis") as redis_server:
        env = {**services.product_env, "ANGELOS_REDIS_URL": redis_server.url,
               "SEND_LEDGER_NAMESPACE": namespace, "ANGELOS_LOCAL_SCOPES": "mail.read",
               **archive_env(keys, archive_dir)}  # fmt: skip
        client = connect(redis_server.url)
        store = make_store(client, namespace, retention_ms=604_800_000)
        try:
            before = await some_sends(store)
            log_path = tmp_path / "serve.log"
            with log_path.open("wb") as log, http_server(env, *LOCAL_OWNER, stderr=log) as base:
                first = await asyncio.to_thread(
                    healthz_archive, base, lambda s: s["records"] > 0 and s["behind_events"] == 0
                )
                redis_server.kill()
                await client.aclose()
                await asyncio.sleep(1.5)  # the archiver meets the dead store at least once
                redis_server.start()
                client = connect(redis_server.url)
                store = make_store(client, namespace, retention_ms=604_800_000)
                after = await some_sends(store)
                status = await asyncio.to_thread(
                    healthz_archive, base,
                    lambda s: s["records"] > first["records"] and s["behind_events"] == 0,
                )  # fmt: skip
                assert "archiving" == status["state"]
            assert "archive_store_unavailable" in log_path.read_text()  # it met the dead store
            found = archived(archive_dir)
            pids = {r.pid for r in found if isinstance(r, records.EventRecord)}
            assert set(before.values()) | set(after.values()) <= pids
            assert await index_ids(client, store) == event_ixs(found)  # each once, in order
        finally:
            await client.aclose()
        code, report = verify(services, namespace, keys, archive_dir,
                              ANGELOS_REDIS_URL=redis_server.url)  # fmt: skip
        assert ([], 0) == (report["findings"], code)


async def test_release_gives_every_kept_stream_its_retention_back(
    services: Services, namespace: str, store: LedgerStore, keys: Keys, archive_dir: Path,
    client: aioredis.Redis,
) -> None:  # fmt: skip
    assert 0 == archive_once(services, namespace, keys, archive_dir).returncode
    pid, _ = await claimed_send(store)
    assert -1 == await client.pttl(store.keys.stream(pid))  # kept: not archived yet
    done = run_ledger(services, namespace, "archive", "--release", **archive_env(keys, archive_dir))
    assert 0 == done.returncode, done.stderr
    assert "the retention applies again to 1 stream(s)" in done.stdout
    assert 0 < await client.pttl(store.keys.stream(pid)) <= 604_800_000
    assert await client.hget(store.keys.meta, "archive_pos") is None
    later, _ = await claimed_send(store)
    assert await client.pttl(store.keys.stream(later)) > 0  # no archive: the retention at once
