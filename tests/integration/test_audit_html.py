"""`angelos ledger verify --html` and `replay --html` against a real Redis, run as the operator
would, and the page they write as headless Chromium shows it (from a file:// URL)."""

from __future__ import annotations

import asyncio
import os
import re
import struct
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from ledger.store.ledger_store import LedgerStore
from support.browser import browser
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    FILING_SAVED,
    FILING_STARTED,
    REJECTED_ACK,
    UNKNOWN,
)
from support.ledger_cli import (
    as_json,
    namespace_fixture,
    rewrite,
    session_redis_fixture,
    some_sends,
    store_fixture,
)
from support.ledger_cli import run_ledger as cli
from support.ledger_redis import advance, claimed_send, now_ms, prepared_send
from support.services import Services

pytestmark = pytest.mark.services

__all__ = ["namespace_fixture", "session_redis_fixture", "store_fixture"]
VERDICT = "document.getElementById('verdict').textContent"


async def every_status(store: LedgerStore, client: aioredis.Redis) -> dict[str, str]:
    """One send of each public status (a corrupt one by a changed byte: one finding), all
    written through the real scripts; the accepted one has its Sent copy filed."""
    accepted, head = await claimed_send(store, append_sent=True)
    await advance(store, accepted, head, ATTEMPT, COMMIT, ACCEPTED, FILING_STARTED, FILING_SAVED)
    rejected, head = await claimed_send(store)
    await advance(store, rejected, head, ATTEMPT, COMMIT, REJECTED_ACK)
    unknown, head = await claimed_send(store)
    await advance(store, unknown, head, ATTEMPT, COMMIT, UNKNOWN)
    sending, head = await claimed_send(store)
    await advance(store, sending, head, ATTEMPT)
    prepared, _ = await prepared_send(store)
    expired, _ = await prepared_send(store, ttl_ms=1_000, created_ms=now_ms() - 1_000)
    corrupt, head = await claimed_send(store)
    await advance(store, corrupt, head, ATTEMPT, COMMIT, ACCEPTED)
    await rewrite(client, store.keys.stream(corrupt), 3, b"example.test", b"example.tesx")
    return {
        "accepted": accepted, "rejected": rejected, "unknown": unknown, "sending": sending,
        "prepared": prepared, "expired": expired, "corrupt": corrupt,
    }  # fmt: skip


def statuses_drawn(page: str) -> dict[str, str]:
    """Each drawn timeline's prepared_id and status class."""
    return dict(re.findall(r'<article id="send-([0-9a-f]{32})" class="send s-(\w+)">', page))


async def test_verify_html_writes_a_page_with_every_timeline_and_keeps_stdout(
    services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis, tmp_path: Path
) -> None:
    pids = await every_status(store, client)
    out = tmp_path / "audit.html"

    done = cli(services, namespace, "verify", "--html", str(out))

    page = out.read_text(encoding="utf-8")
    assert 1 == done.returncode
    assert f"FINDING {pids['corrupt']} seq 3: hash_mismatch" in done.stdout
    assert "<!DOCTYPE html>" not in done.stdout and f"written to {out}" in done.stderr
    assert {pid: status for status, pid in pids.items()} == statuses_drawn(page)
    assert '<p id="verdict" class="v-findings">1 finding</p>' in page
    assert "<script" not in page


async def test_verify_json_is_the_same_with_or_without_html(
    services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis, tmp_path: Path
) -> None:
    await every_status(store, client)
    plain = as_json(cli(services, namespace, "verify", "--json"))
    with_html = as_json(
        cli(services, namespace, "verify", "--json", "--html", str(tmp_path / "a.html"))
    )
    for report in (plain, with_html):
        del report["elapsed_s"], report["events_per_s"], report["checked"]["as_of"]
        del report["checked"]["as_of_ms"]
    assert plain == with_html and [] == with_html["sends"]


async def test_a_resolution_made_with_resolve_is_in_the_page(
    services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis, tmp_path: Path
) -> None:
    pids = await every_status(store, client)
    resolved = cli(services, namespace, "resolve", pids["unknown"], "--outcome", "arrived",
                   "--note", "recipient confirmed", "--by", "auditor")  # fmt: skip
    assert 0 == resolved.returncode, resolved.stderr
    out = tmp_path / "audit.html"

    cli(services, namespace, "verify", "--html", str(out), "--quiet")

    page = out.read_text(encoding="utf-8")
    resolutions = page[page.index('<section id="resolutions"') :]
    assert pids["unknown"] in resolutions and "<td>arrived</td>" in resolutions
    assert "resolution</b>" in page  # the operator_resolution step on the unknown's timeline


async def test_replay_html_of_an_export_shows_its_manifest_and_timelines(
    services: Services, store: LedgerStore, namespace: str, tmp_path: Path
) -> None:
    pids = await some_sends(store)
    export = tmp_path / "ledger.jsonl"
    assert 0 == cli(services, namespace, "export", "--output", str(export)).returncode
    out = tmp_path / "replay.html"

    done = cli(services, namespace, "replay", str(export), "--html", str(out))

    page = out.read_text(encoding="utf-8")
    assert 0 == done.returncode and "verified: no findings" in done.stdout
    assert f"<dt>namespace</dt><dd>{namespace}</dd>" in page
    assert "every line held against the export&#x27;s manifest and trailer" in page
    assert {pid: status for status, pid in pids.items()} == statuses_drawn(page)
    open_items = page[page.index('<section id="open-items"') :]
    assert f'<a href="#send-{pids["unknown"]}">' in open_items


async def test_an_html_file_that_cannot_be_written_is_a_usage_error(
    services: Services, store: LedgerStore, namespace: str, tmp_path: Path
) -> None:
    await some_sends(store)
    done = cli(services, namespace, "verify", "--html", str(tmp_path / "no" / "such" / "a.html"))
    assert 2 == done.returncode and "cannot write" in done.stderr
    assert "verified: no findings" in done.stdout


async def test_chromium_renders_the_page_with_its_styles_and_no_script(
    services: Services, store: LedgerStore, namespace: str, client: aioredis.Redis, tmp_path: Path
) -> None:
    pids = await every_status(store, client)
    out = tmp_path / "audit.html"
    cli(services, namespace, "verify", "--html", str(out), "--quiet")
    shot = Path(os.environ.get("ANGELOS_SCREENSHOT_DIR") or tmp_path) / "audit-report.png"

    async with browser() as chromium:
        page = await chromium.open_page(out.as_uri())
        verdict = await page.evaluate(VERDICT)
        colour = await page.evaluate(
            "getComputedStyle(document.getElementById('verdict')).backgroundColor"
        )
        drawn = await page.evaluate("document.querySelectorAll('article.send').length")
        scripts = await page.evaluate("document.scripts.length")
        corrupt = await page.evaluate(
            f"document.getElementById('send-{pids['corrupt']}').innerText"
        )
        await page.screenshot(shot)

    assert ("1 finding", "rgb(207, 34, 46)") == (verdict, colour)  # the inline CSS applied
    assert (len(pids), 0) == (drawn, scripts)
    assert "hash_mismatch" in corrupt
    data = await asyncio.to_thread(shot.read_bytes)
    assert (b"\x89PNG\r\n\x1a\n", 1024) == (data[:8], struct.unpack(">I", data[16:20])[0])
