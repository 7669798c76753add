"""What a ledger write must be confirmed by: the WAIT or WAITAOF command sent behind it, and
which replies confirm it."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ledger.store.durability.acks import NONE, Acknowledgment


class TestRequired:
    @pytest.mark.parametrize(
        ("ack", "required"),
        [
            (NONE, False),
            (Acknowledgment(), False),
            (Acknowledgment(replicas=0, timeout_ms=500), False),
            (Acknowledgment(replicas=1), True),
            (Acknowledgment(replicas=3), True),
            (Acknowledgment(waitaof=True), True),
            (Acknowledgment(waitaof=True, replicas=2), True),
        ],
    )
    def test_only_replicas_or_waitaof_require_a_confirmation(
        self, ack: Acknowledgment, required: bool
    ) -> None:
        assert ack.required is required

    def test_the_defaults(self) -> None:
        assert (NONE.replicas, NONE.waitaof, NONE.timeout_ms) == (0, False, 2000)


class TestWait:
    def test_the_command_asks_the_replicas_within_the_timeout(self) -> None:
        assert Acknowledgment(replicas=2, timeout_ms=1500).command() == ("WAIT", 2, 1500)

    def test_the_default_timeout(self) -> None:
        assert Acknowledgment(replicas=1).command() == ("WAIT", 1, 2000)

    @pytest.mark.parametrize(
        ("replicas", "reply", "confirms"),
        [
            (1, 1, True),
            (1, 2, True),
            (2, 2, True),
            (2, 1, False),
            (1, 0, False),
            (1, b"1", True),
            (2, b"1", False),
            (0, 0, True),
        ],
    )
    def test_the_reply_counts_the_replicas(self, replicas: int, reply: Any, confirms: bool) -> None:
        assert Acknowledgment(replicas=replicas).confirms(reply) is confirms


class TestWaitaof:
    def test_the_command_asks_the_local_fsync_and_the_replicas(self) -> None:
        ack = Acknowledgment(waitaof=True, replicas=1, timeout_ms=800)
        assert ack.command() == ("WAITAOF", 1, 1, 800)

    def test_the_command_without_replicas_asks_the_local_fsync_only(self) -> None:
        assert Acknowledgment(waitaof=True).command() == ("WAITAOF", 1, 0, 2000)

    @pytest.mark.parametrize(
        ("replicas", "reply", "confirms"),
        [
            (0, [1, 0], True),
            (0, [0, 0], False),  # the local fsync did not happen in time
            (1, [1, 1], True),
            (1, [1, 2], True),
            (1, [1, 0], False),  # no replica fsynced it
            (1, [0, 1], False),
            (2, [1, 1], False),
            (1, (b"1", b"1"), True),
            (1, (b"1", b"0"), False),
        ],
    )
    def test_the_reply_needs_the_local_fsync_and_the_replicas(
        self, replicas: int, reply: Any, confirms: bool
    ) -> None:
        assert Acknowledgment(waitaof=True, replicas=replicas).confirms(reply) is confirms


class TestErrors:
    @pytest.mark.parametrize(
        "error",
        [
            ResponseError("ERR unknown command 'WAITAOF'"),
            ResponseError("ERR WAIT cannot be used with replica instances"),
            RedisConnectionError("Connection closed by server."),
            RedisTimeoutError("Timeout reading from socket"),
            OSError("reset"),
            ValueError("anything"),
        ],
    )
    @pytest.mark.parametrize(
        "ack",
        [
            NONE,
            Acknowledgment(replicas=1),
            Acknowledgment(waitaof=True),
            Acknowledgment(waitaof=True, replicas=2),
        ],
    )
    def test_an_error_reply_never_confirms(self, ack: Acknowledgment, error: BaseException) -> None:
        assert ack.confirms(error) is False
