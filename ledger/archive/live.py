"""Hold the live ledger in Redis against its archive: what is live but unarchived, archived but
changed live, or archived but gone live (deleted, or a store that went back in time)."""

from __future__ import annotations

from msgspec import Struct

from ledger.archive.audit import ArchiveRead
from ledger.audit.checks import Finding
from ledger.store.answers import text
from ledger.store.bulk import BulkReader, pages
from schemas.ledger import LedgerEntry

_BATCH = 256


class LiveComparison(Struct, kw_only=True):
    """What the comparison found and how far the archiver had come."""

    findings: list[Finding]
    archived_in_store: int  # the store's count of archived records (-1: never archived)
    not_yet_archived: int  # live index entries after the archive's position


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return (int(ms), int(seq)) if ms.isdigit() and seq.isdigit() else (0, 0)


async def compare_live(
    found: ArchiveRead, reader: BulkReader, now_ms: int, retention_ms: int
) -> LiveComparison:
    """Compare the archive with the store the reader reads; every finding names a send."""
    raw = await reader.client.hmget(reader.keys.meta, ["archive_pos", "archive_n"])
    pos_text, n_text = (text(value) if value is not None else "" for value in raw)
    findings: list[Finding] = []
    archived_n = int(n_text) if n_text.isdigit() else -1
    if archived_n > len(found.leaves):
        findings.append(Finding(
            "", 0, "archive_behind_store",
            f"the store says {archived_n} records were archived; the archive holds "
            f"{len(found.leaves)}: the archive was rolled back or lost records",
        ))  # fmt: skip
    pos = _id_key(pos_text) if pos_text else (0, 0)
    later = 0
    for item in await reader.index():
        if _id_key(item.id) > pos:
            later += 1
            continue
        archived = found.ixs.get(item.id)
        if archived is None:
            findings.append(Finding(
                item.pid, item.seq, "live_not_archived",
                f"the store holds this {item.t or 'event'} under index entry {item.id}, "
                "before the archive's position, but the archive lacks it",
            ))  # fmt: skip
        elif (archived.pid, archived.seq, archived.h) != (item.pid, item.seq, item.h):
            findings.append(Finding(
                item.pid, item.seq, "live_changed",
                f"index entry {item.id} names another event live than archived",
            ))  # fmt: skip
    pids = list(found.entries)
    for page in pages(pids, _BATCH):
        _, groups = await reader.entries(page)
        for pid, live in zip(page, groups, strict=True):
            findings += _stream_findings(found, pid, live, now_ms, retention_ms)
    return LiveComparison(findings=findings, archived_in_store=archived_n, not_yet_archived=later)


def _stream_findings(
    found: ArchiveRead, pid: str, live: list[LedgerEntry], now_ms: int, retention_ms: int
) -> list[Finding]:
    archived = found.entries[pid]
    if not live:
        last = max(entry.srv_ms for entry in archived)
        if last + retention_ms > now_ms:
            return [Finding(
                pid, 0, "live_stream_gone",
                f"the store no longer holds this send's {len(archived)} archived event(s), "
                "before its retention ran out: deleted, or the store went back in time",
            )]  # fmt: skip
        return []  # expired as the retention says
    by_seq = {entry.seq: entry for entry in live}
    problems = []
    for entry in archived:
        now = by_seq.get(entry.seq)
        if now is None:
            problems.append(Finding(
                pid, entry.seq, "live_event_gone",
                f"the archived {entry.t} is gone from the store's stream",
            ))  # fmt: skip
        elif (now.e, now.h, now.t, now.eid) != (entry.e, entry.h, entry.t, entry.eid):
            problems.append(Finding(
                pid, entry.seq, "live_changed",
                f"the store's {now.t or 'entry'} differs from the one archived",
            ))  # fmt: skip
    return problems
