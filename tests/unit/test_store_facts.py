"""The durability rule and the store reading it applies to (pure: replies as Redis sends them)."""

from __future__ import annotations

import msgspec
import pytest
from redis.exceptions import ResponseError

from ledger.store.answers import Halt
from ledger.store.durability.facts import DurabilityOptions, StoreFacts, durability, facts_from

STRICT = DurabilityOptions()


def facts(**changes: object) -> StoreFacts:
    base: dict[str, object] = {
        "run_id": "r" * 40,
        "version": "7.0.15",
        "aof_enabled": True,
        "appendfsync": "always",
        "maxmemory_policy": "noeviction",
        "clock": 12,
        "halt": "",
        "store_id": "ab" * 16,
    }
    return StoreFacts(**{**base, **changes})  # type: ignore[arg-type]


def replies(**changes: object) -> list[object]:
    server = b"# Server\r\nredis_version:7.0.15\r\nrun_id:" + b"r" * 40 + b"\r\n"
    persistence = b"# Persistence\r\nloading:0\r\naof_enabled:1\r\n"
    base: dict[str, object] = {
        "server": server,
        "persistence": persistence,
        "fsync": [b"appendfsync", b"always"],
        "policy": [b"maxmemory-policy", b"noeviction"],
        "meta": [b"12", None, b"ab" * 16],
    }
    base.update(changes)
    return [base["server"], base["persistence"], base["fsync"], base["policy"], base["meta"]]


class TestTheDurabilityRule:
    def test_aof_with_fsync_always_and_noeviction_is_durable(self) -> None:
        verdict = durability(facts(), STRICT, waitaof=False)
        assert ("", "aof_always") == msgspec.structs.astuple(verdict)

    def test_aof_switched_off_is_not_durable(self) -> None:
        verdict = durability(facts(aof_enabled=False), STRICT, waitaof=False)
        assert "AOF persistence is off: the ledger needs appendonly yes" == verdict.reason

    def test_fsync_everysec_is_not_durable_without_waitaof(self) -> None:
        verdict = durability(facts(appendfsync="everysec"), STRICT, waitaof=False)
        assert verdict.reason.startswith("appendfsync is everysec: the ledger needs")

    def test_fsync_everysec_with_a_working_waitaof_is_durable(self) -> None:
        assert "waitaof" == durability(facts(appendfsync="everysec"), STRICT, waitaof=True).mode

    def test_an_eviction_policy_is_not_durable(self) -> None:
        verdict = durability(facts(maxmemory_policy="allkeys-lru"), STRICT, waitaof=False)
        assert "maxmemory-policy is allkeys-lru: the ledger needs noeviction" == verdict.reason

    def test_forbidden_config_needs_the_operator_assertions(self) -> None:
        hidden = facts(appendfsync=None, maxmemory_policy=None)
        assert "SEND_LEDGER_FSYNC" in durability(hidden, STRICT, waitaof=False).reason
        asserted = DurabilityOptions(provider_managed=True)
        assert "SEND_LEDGER_ASSUME_NOEVICTION" in durability(hidden, asserted, waitaof=False).reason
        both = DurabilityOptions(provider_managed=True, assume_noeviction=True)
        verdict = durability(hidden, both, waitaof=False)
        assert ("", "provider_managed") == msgspec.structs.astuple(verdict)

    def test_a_setting_that_is_not_a_plain_word_is_never_echoed(self) -> None:
        verdict = durability(facts(maxmemory_policy="x\r\nINJECTED"), STRICT, waitaof=False)
        assert "maxmemory-policy is unsupported: the ledger needs noeviction" == verdict.reason


class TestAStoreReading:
    def test_the_replies_become_the_facts(self) -> None:
        assert facts() == facts_from(replies())

    def test_a_forbidden_config_get_reads_as_unknown(self) -> None:
        read = facts_from(replies(fsync=ResponseError("NOPERM"), policy=ResponseError("NOPERM")))
        assert (None, None) == (read.appendfsync, read.maxmemory_policy)

    def test_an_empty_meta_is_clock_zero_and_no_halt(self) -> None:
        read = facts_from(replies(meta=[None, None, None]))
        assert (0, "", "") == (read.clock, read.halt, read.store_id)

    def test_a_recorded_halt_is_read(self) -> None:
        read = facts_from(replies(meta=[b"30", b"1700000000000 30 41", b"ab" * 16]))
        assert Halt(1_700_000_000_000, 30, 41, "1700000000000 30 41") == Halt.parse(read.halt)

    def test_an_error_reading_info_or_meta_fails_loudly(self) -> None:
        with pytest.raises(ResponseError):
            facts_from(replies(meta=ResponseError("LOADING")))


class TestAHaltRecord:
    def test_an_unreadable_record_still_halts(self) -> None:
        assert Halt(0, 0, 0, "garbage") == Halt.parse("garbage")

    def test_the_reason_names_the_acknowledgement_command(self) -> None:
        reason = Halt.parse("1700000000000 30 41").reason
        assert "angelos ledger acknowledge-rollback" in reason
        assert "2023-11-14T22:13:20Z" in reason
