"""The hash chain, genesis and optional MAC and its verification."""

from __future__ import annotations

import msgspec
import pytest

from ledger.chain import (
    chain_problems,
    event_hash,
    event_mac,
    genesis,
    mac_key,
    mac_key_id,
    verified_events,
)
from schemas.ledger import LedgerCorrupt
from support.ledger import ATTEMPT, PID, build_events, chain, claimed, prepared, replace_e

# Pinned once (cross-checked with sha256sum and `openssl dgst -hmac`); they must never change,
# or every stored ledger stops verifying.
GENESIS_OF_PID = "144b7bee3eb90b130b110a756f5b257baf8bc7953435e11089caf1f31ec9675e"
GENESIS_OF_ZEROS = "ab2841d90cfd8df4fd89c92f2379dd3304a768139e0ddea056673bb3c2f876b1"
PREPARED_E = (
    '{"actor":"api:test-1","at_ms":1800000000001,"data":{"action":"new","attachment_sha256":'
    '["e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5"],'
    '"created_ms":1800000000000,'
    '"digest":"d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4",'
    '"encoded_bytes":1234,"expires_ms":1800000900000,'
    '"message_id":"<0123456789abcdef0123456789abcdef@example.test>",'
    '"owner":"a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",'
    '"payload_sha256":"f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6",'
    '"recipient_count":2,"transport":"smtp"},"eid":"00000000000000000000000000000002",'
    '"pid":"0123456789abcdef0123456789abcdef",'
    '"prev":"144b7bee3eb90b130b110a756f5b257baf8bc7953435e11089caf1f31ec9675e",'
    '"seq":1,"type":"prepared","v":1}'
)
PREPARED_H = "1b383ce93fa077813399d76cb1cbdba38e2eb8b518aa06490ad2dfa00ef873bb"
CLAIMED_H = "ce19693812003f52f636cc25759c1512916bab9469b6edad2245c0181f69cdf8"
KEY = mac_key("00" * 31 + "01")
PREPARED_M = "a54a0da94dc09d62c9b20909dff2f4c3536fb808c76a656ebb721b9cb16d647a"
KEY_ID = "ec4916dd28fc4c10"


class TestVectors:
    def test_genesis_is_pinned(self) -> None:
        assert GENESIS_OF_PID == genesis(PID)
        assert GENESIS_OF_ZEROS == genesis("0" * 32)

    def test_the_canonical_bytes_of_a_prepared_event_are_pinned(self) -> None:
        (_, e, h), (_, _, second) = build_events([prepared(), claimed()])
        assert PREPARED_E.encode() == e
        assert PREPARED_H == h == event_hash(e)
        assert CLAIMED_H == second

    def test_the_mac_and_key_id_are_pinned(self) -> None:
        assert PREPARED_M == event_mac(KEY, PREPARED_H)
        assert KEY_ID == mac_key_id(KEY)

    def test_a_key_must_be_64_hex(self) -> None:
        for bad in ("00" * 31, "zz" * 32):
            with pytest.raises(ValueError):
                mac_key(bad)


class TestVerification:
    def test_a_correct_chain_has_no_problems(self) -> None:
        entries = chain([prepared(), claimed()])
        assert [] == chain_problems(PID, entries)
        assert 2 == len(verified_events(PID, entries))

    def test_one_changed_byte_of_e_is_a_hash_mismatch_at_that_seq(self) -> None:
        entries = chain([prepared(), claimed()])
        entries[1] = replace_e(entries[1], entries[1].e.replace("false", "true"))
        kinds = {(p.seq, p.kind) for p in chain_problems(PID, entries)}
        assert (2, "hash_mismatch") in kinds

    def test_a_rehashed_edit_breaks_the_next_prev(self) -> None:
        entries = chain([prepared(), claimed()])
        entries[0] = replace_e(entries[0], entries[0].e.replace(":1234,", ":1235,"), rehash=True)
        kinds = {(p.seq, p.kind) for p in chain_problems(PID, entries)}
        assert {(2, "prev_mismatch")} == kinds

    def test_a_removed_middle_entry_is_a_gap(self) -> None:
        entries = chain([prepared(), claimed(), ATTEMPT])
        kinds = {p.kind for p in chain_problems(PID, [entries[0], entries[2]])}
        assert {"id_gap", "prev_mismatch"} == kinds

    def test_a_first_event_not_starting_from_genesis_is_reported(self) -> None:
        entries = chain([prepared()], pid=PID)
        kinds = {p.kind for p in chain_problems("f" * 32, entries)}
        assert "prev_mismatch" in kinds and "field_mismatch" in kinds

    def test_a_non_canonical_e_is_reported(self) -> None:
        entries = chain([prepared()])
        spaced = entries[0].e.replace('{"actor"', '{ "actor"')
        kinds = {p.kind for p in chain_problems(PID, [replace_e(entries[0], spaced, rehash=True)])}
        assert {"not_canonical"} == kinds

    def test_a_type_field_that_disagrees_with_e_is_reported(self) -> None:
        entries = chain([prepared()])
        kinds = {p.kind for p in chain_problems(PID, [msgspec.structs.replace(entries[0], t="x")])}
        assert {"field_mismatch"} == kinds

    def test_server_time_going_backwards_is_reported(self) -> None:
        entries = chain([prepared(), claimed()], srv_ms=[1_800_000_000_010, 1_800_000_000_005])
        assert ["time_reversed"] == [p.kind for p in chain_problems(PID, entries)]

    def test_writer_clock_skew_beyond_five_minutes_is_reported(self) -> None:
        entries = chain([prepared()], srv_ms=[1_800_000_000_001 + 300_001])
        assert ["clock_skew"] == [p.kind for p in chain_problems(PID, entries)]
        assert [] == chain_problems(PID, entries, skew_ms=None)

    def test_verified_events_raises_on_the_first_problem(self) -> None:
        entries = chain([prepared(), claimed()])
        entries[1] = replace_e(entries[1], entries[1].e.replace("false", "true"))
        with pytest.raises(LedgerCorrupt):
            verified_events(PID, entries)


class TestMac:
    def test_every_entry_verifies_with_the_right_key(self) -> None:
        entries = chain([prepared(), claimed()], key=KEY)
        assert PREPARED_M == entries[0].m
        assert [] == chain_problems(PID, entries, key=KEY)

    def test_another_key_fails_every_entry(self) -> None:
        entries = chain([prepared(), claimed()], key=KEY)
        other = mac_key("ff" * 32)
        assert [(1, "mac_mismatch"), (2, "mac_mismatch")] == [
            (p.seq, p.kind) for p in chain_problems(PID, entries, key=other)
        ]

    def test_an_entry_without_m_fails_when_a_key_is_given(self) -> None:
        entries = chain([prepared()])
        assert ["mac_missing"] == [p.kind for p in chain_problems(PID, entries, key=KEY)]
