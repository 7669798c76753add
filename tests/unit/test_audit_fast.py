"""The fast path of `verify` (ledger.audit_fast): it gives a verdict only on sound streams, and
that verdict is the full audit's, for generated streams with and without random tampering."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.audit import AuditRules, Finding, StreamAudit
from ledger.audit_fast import Entry, index_text, sound_audit
from ledger.audit_scan import full_check, index_entry_of, raw_item_of
from ledger.chain import event_hash, event_mac
from schemas.ledger import LedgerEntry
from schemas.ledger_events import EventData, Expired, RecoveryClassified, SentFilingFailed
from support.ledger import (
    ACCEPTED,
    ATTEMPT,
    COMMIT,
    DUPLICATE,
    EXPIRED,
    FILING_STARTED,
    FILING_UNKNOWN,
    LATE,
    PATHS,
    PID,
    RECOVERED_NOT_ATTEMPTED,
    RECOVERED_NOT_SUBMITTED,
    RECOVERED_UNKNOWN,
    REFUSED,
    T0,
    TTL_MS,
    UNKNOWN,
    VARIANTS,
    actor_for,
    chain,
    claimed,
    prepared,
)

KEY = bytes(range(32))
GRACE = 1_000
SKEW = 300_000
SENT = [prepared(), claimed(), ATTEMPT, COMMIT, ACCEPTED]
# Valid lifecycles (annotations are mixed in by the strategy) plus every single-event variant.
VALID: list[list[EventData]] = [
    *([*path] for path in PATHS.values() if path),
    [
        prepared(),
        claimed(append_sent=True),
        ATTEMPT,
        COMMIT,
        ACCEPTED,
        FILING_STARTED,
        FILING_UNKNOWN,
    ],
    [prepared(), claimed(), RECOVERED_NOT_ATTEMPTED, LATE],
    [prepared(), claimed(), ATTEMPT, RECOVERED_NOT_SUBMITTED],
    [prepared(), claimed(), ATTEMPT, COMMIT, RECOVERED_UNKNOWN, LATE],
]
ANY_DATA = [data for variants in VARIANTS.values() for data in variants]
TAMPERS = (
    "none",
    "flip_byte",
    "flip_byte_rehash",
    "drop_entry",
    "swap_entries",
    "bad_id",
    "bad_mac",
    "no_mac",
    "no_field",
    "extra_field",
    "reordered_fields",
    "non_ascii",
    "srv_not_digit",
    "srv_back",
    "index_drop",
    "index_duplicate",
    "index_wrong_h",
    "index_wrong_t",
    "index_wrong_seq",
    "index_reorder",
    "wrong_t",
    "wrong_eid",
    "foreign_pid",
)


def rows_of(entries: Sequence[LedgerEntry]) -> list[Entry]:
    """The stream entries as an XREAD reply parsed by hiredis gives them."""
    rows: list[Entry] = []
    for entry in entries:
        fields = [b"e", entry.e.encode(), b"h", entry.h.encode(), b"t", entry.t.encode()]
        fields += [b"eid", entry.eid.encode(), b"srv_ms", str(entry.srv_ms).encode()]
        if not isinstance(entry.m, msgspec.UnsetType):
            fields += [b"m", entry.m.encode()]
        rows.append([entry.id.encode(), fields])
    return rows


def index_of(entries: Sequence[LedgerEntry]) -> list[Entry]:
    """The index entries a correct writer leaves for these entries, as hiredis gives them."""
    index: list[Entry] = []
    for n, entry in enumerate(entries):
        fields = [b"pid", entry.pid.encode(), b"seq", b"%d" % entry.seq]
        fields += [b"t", entry.t.encode(), b"h", entry.h.encode()]
        index.append([f"{entry.srv_ms}-{n}".encode(), fields])
    return index


def full_verdict(
    pid: str, rows: Sequence[Entry], indexed: Sequence[Entry], rules: AuditRules
) -> tuple[StreamAudit, list[Finding]]:
    """The full audit of verify_ledger for one stream: its verdict and its index findings."""
    items = [raw_item_of(row) for row in rows]
    return full_check(pid, items, [index_entry_of(row) for row in indexed], rules)


def with_field(entry: Entry, name: bytes, value: bytes | None) -> Entry:
    """The entry with one field's value replaced (or the field dropped when value is None)."""
    flat = list(entry[1])
    spot = flat.index(name) if name in flat[::2] else None
    if spot is None:
        if value is not None:
            flat += [name, value]
    elif value is None:
        del flat[spot : spot + 2]
    else:
        flat[spot + 1] = value
    return [entry[0], flat]


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[Entry], list[Entry], AuditRules, str]:
    """A stream (valid lifecycle or random events), its index, rules and one tamper or none."""
    if draw(st.booleans()):
        items = list(draw(st.sampled_from(VALID)))
        for _ in range(draw(st.integers(0, 2))):  # annotations after the first event
            spot = draw(st.integers(1, len(items)))
            items.insert(spot, draw(st.sampled_from([REFUSED, DUPLICATE, LATE])))
    else:
        items = draw(st.lists(st.sampled_from(ANY_DATA), min_size=1, max_size=7))
    gaps = draw(
        st.lists(
            st.sampled_from([0, 1, 5, GRACE - 1, GRACE, GRACE + 1, TTL_MS, SKEW + 10]),
            min_size=len(items),
            max_size=len(items),
        )
    )
    times, now = [], T0
    for gap in gaps:
        now += gap
        times.append(now)
    if draw(st.booleans()):  # writers' clocks in step with the server (no skew)
        times = [T0 + n for n in range(1, len(items) + 1)]
        for n, data in enumerate(items):
            if isinstance(data, RecoveryClassified | Expired) or (
                isinstance(data, SentFilingFailed) and draw(st.booleans())
            ):
                times[n] = times[n - 1] + draw(st.sampled_from([1, GRACE, TTL_MS]))
    actors = [actor_for(data) for data in items]
    if draw(st.booleans()):
        spot = draw(st.integers(0, len(items) - 1))
        actors[spot] = draw(st.sampled_from(["recovery:worker-1", "api:x", "sweeper:s"]))
    keyed = draw(st.booleans())
    entries = chain(items, srv_ms=times, key=KEY if keyed else None, actors=actors)
    rules = AuditRules(
        key=KEY if keyed and draw(st.booleans()) else None,
        skew_ms=SKEW,
        grace_ms=GRACE,
        retention_ms=3_600_000,
        as_of_ms=times[-1] + draw(st.sampled_from([0, GRACE + 1, TTL_MS, 4_000_000])),
    )
    tamper = draw(st.sampled_from(TAMPERS))
    pid, rows, indexed = PID, rows_of(entries), index_of(entries)
    spot = draw(st.integers(0, len(rows) - 1))
    other = draw(st.integers(0, len(rows) - 1))
    e, h = rows[spot][1][1], rows[spot][1][3]
    if tamper in ("flip_byte", "flip_byte_rehash"):
        at = draw(st.integers(0, len(e) - 1))
        changed = e[:at] + (b"x" if e[at : at + 1] != b"x" else b"y") + e[at + 1 :]
        rows[spot] = with_field(rows[spot], b"e", changed)
        if tamper == "flip_byte_rehash":
            rows[spot] = with_field(rows[spot], b"h", event_hash(changed).encode())
    elif tamper == "drop_entry":
        del rows[spot]
    elif tamper == "swap_entries":
        rows[spot], rows[other] = rows[other], rows[spot]
    elif tamper == "bad_id":
        rows[spot] = [draw(st.sampled_from([b"0-0", b"0-09", b"1-1", b"0-99"])), rows[spot][1]]
    elif tamper == "bad_mac":
        rows[spot] = with_field(rows[spot], b"m", event_mac(bytes(32), h.decode()).encode())
    elif tamper == "no_mac":
        rows[spot] = with_field(rows[spot], b"m", None)
    elif tamper == "no_field":
        name = draw(st.sampled_from([b"e", b"h", b"t", b"eid", b"srv_ms"]))
        rows[spot] = with_field(rows[spot], name, None)
    elif tamper == "extra_field":
        rows[spot] = with_field(rows[spot], b"x", b"1")
    elif tamper == "reordered_fields":
        flat = rows[spot][1]
        rows[spot] = [rows[spot][0], flat[2:4] + flat[0:2] + flat[4:]]
    elif tamper == "non_ascii":
        rows[spot] = with_field(rows[spot], b"e", e.replace(b"smtp", b"sm\xe9p", 1))
    elif tamper == "srv_not_digit":
        srv = draw(st.sampled_from([b"", b"-1", b"x", b"1e3"]))
        rows[spot] = with_field(rows[spot], b"srv_ms", srv)
    elif tamper == "srv_back":
        rows[spot] = with_field(rows[spot], b"srv_ms", b"%d" % (T0 - 1))
    elif tamper == "index_drop":
        del indexed[spot]
    elif tamper == "index_duplicate":
        indexed.insert(spot, indexed[spot])
    elif tamper == "index_wrong_h":
        indexed[spot] = with_field(indexed[spot], b"h", b"0" * 64)
    elif tamper == "index_wrong_t":
        indexed[spot] = with_field(indexed[spot], b"t", b"claimed")
    elif tamper == "index_wrong_seq":
        indexed[spot] = with_field(indexed[spot], b"seq", b"01")
    elif tamper == "index_reorder":
        indexed[spot], indexed[other] = indexed[other], indexed[spot]
    elif tamper == "wrong_t":
        rows[spot] = with_field(rows[spot], b"t", b"expired")
    elif tamper == "wrong_eid":
        rows[spot] = with_field(rows[spot], b"eid", b"f" * 32)
    elif tamper == "foreign_pid":
        pid = "f" * 32
    return pid, rows, indexed, rules, tamper


def fast_verdict(
    pid: str, rows: Sequence[Entry], indexed: Sequence[Entry], rules: AuditRules
) -> StreamAudit | None:
    """The fast pass's verdict when the index agrees with it (as merge_scan decides), else None."""
    judged = sound_audit(pid, rows, rules)
    if judged is None:
        return None
    audit, text = judged
    return audit if index_text(indexed) == text else None


class TestEquivalence:
    @settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(streams())
    def test_the_fast_verdict_is_the_full_audits_whenever_it_gives_one(
        self, case: tuple[str, list[Entry], list[Entry], AuditRules, str]
    ) -> None:
        pid, rows, indexed, rules, _ = case
        fast = fast_verdict(pid, rows, indexed, rules)
        full, extra = full_verdict(pid, rows, indexed, rules)
        if fast is not None:
            assert (full, []) == (fast, extra)

    @settings(max_examples=300, deadline=None)
    @given(streams())
    def test_a_stream_without_findings_gets_its_verdict_from_the_fast_path(
        self, case: tuple[str, list[Entry], list[Entry], AuditRules, str]
    ) -> None:
        pid, rows, indexed, rules, _ = case
        full, extra = full_verdict(pid, rows, indexed, rules)
        if not full.findings and not extra and _plain(rows) and _ordered(rows, indexed):
            assert full == fast_verdict(pid, rows, indexed, rules)


def _plain(rows: Sequence[Entry]) -> bool:
    """Rows the fast path is meant to take: exact IDs, the store's fields, decimal times."""
    names = ([b"e", b"h", b"t", b"eid", b"srv_ms"], [b"e", b"h", b"t", b"eid", b"srv_ms", b"m"])
    return all(
        row[0] == b"0-%d" % n and row[1][::2] in names and row[1][9].isdigit()
        for n, row in enumerate(rows, start=1)
    )


def _ordered(rows: Sequence[Entry], indexed: Sequence[Entry]) -> bool:
    """One index entry per stream entry, in seq order."""
    return [row[1][3] for row in indexed] == [b"%d" % n for n in range(1, len(rows) + 1)]


class TestSoundStreams:
    def test_a_sound_accepted_send_takes_the_fast_path(self) -> None:
        entries = chain(SENT)
        rules = AuditRules(grace_ms=GRACE, as_of_ms=T0 + 10_000)
        fast = fast_verdict(PID, rows_of(entries), index_of(entries), rules)
        assert fast is not None and ("accepted", []) == (fast.status, fast.findings)

    def test_an_unknown_outcome_is_flagged_for_investigation_on_the_fast_path(self) -> None:
        entries = chain([prepared(), claimed(), ATTEMPT, COMMIT, UNKNOWN])
        rules = AuditRules(grace_ms=GRACE, as_of_ms=T0 + 10_000)
        fast = fast_verdict(PID, rows_of(entries), index_of(entries), rules)
        assert fast is not None
        assert "outcome unknown: may have been sent" == fast.investigate

    def test_an_expired_preparation_is_judged_like_the_full_audit(self) -> None:
        entries = chain([prepared(expires_ms=T0 + 2), EXPIRED])
        rules = AuditRules(grace_ms=GRACE, as_of_ms=T0 + 10_000)
        rows, indexed = rows_of(entries), index_of(entries)
        assert full_verdict(PID, rows, indexed, rules)[0] == fast_verdict(PID, rows, indexed, rules)

    def test_a_stream_with_one_index_entry_missing_gets_no_fast_verdict(self) -> None:
        entries = chain(SENT)
        rules = AuditRules(grace_ms=GRACE, as_of_ms=T0 + 10_000)
        assert fast_verdict(PID, rows_of(entries), index_of(entries)[1:], rules) is None


class TestIndexText:
    def test_an_index_value_hiding_the_separators_never_matches(self) -> None:
        entries = chain(SENT)
        judged = sound_audit(PID, rows_of(entries), AuditRules(as_of_ms=T0 + 10_000))
        assert judged is not None
        count, _, text = judged[1].partition(b"\n")
        _, _, t2, rest = text.split(b"\n", 3)  # entries 3-5 go inside the second hash
        forged = index_of(entries)[:2]
        forged[1] = [forged[1][0], [b"pid", PID.encode(), b"seq", b"2", b"t", t2, b"h", rest]]
        assert (b"5", b"2\n" + text) == (count, index_text(forged))
        assert judged[1] != index_text(forged)  # two index entries, not five

    def test_an_entry_with_other_fields_has_no_index_text(self) -> None:
        indexed = index_of(chain(SENT))
        indexed[2] = [indexed[2][0], [*indexed[2][1], b"x", b"1"]]
        assert index_text(indexed) is None

    def test_entries_out_of_seq_order_have_no_index_text(self) -> None:
        indexed = index_of(chain(SENT))
        indexed[1], indexed[2] = indexed[2], indexed[1]
        assert index_text(indexed) is None
