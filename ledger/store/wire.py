"""Several commands on one connection in one send, each reply read in turn.

Straight on a redis-py connection rather than through its Pipeline, whose bookkeeping cost more
than the packing (see batch.py); used by the script batches and by the store checks that run
while a connection is being set up, when no pool command may be issued yet.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from typing import Any

from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

Command = Sequence[bytes | str | int | float]


async def exchange(
    connection: AbstractConnection, commands: Iterable[Command], *, check_health: bool = True
) -> list[Any]:
    """Send the commands at once and return each reply; an error reply is returned in its place.

    Any other failure disconnects the connection (replies may still be in flight: it must never
    be reused) and propagates; a silent server fails with redis-py's TimeoutError.
    """
    batch = list(commands)
    try:
        await connection.send_packed_command(
            connection.pack_commands(batch), check_health=check_health
        )
        replies: list[Any] = []
        # One deadline for the batch's replies (they arrive together), not one per reply:
        # redis-py's per-read timeout context cost ~8% of this process's CPU per lifecycle.
        async with asyncio.timeout(connection.socket_timeout):
            for _ in batch:
                try:
                    replies.append(await connection.read_response(timeout=math.inf))
                except ResponseError as exc:  # the connection stays in step after an error
                    replies.append(exc)
    except TimeoutError:
        await connection.disconnect()
        raise RedisTimeout("the ledger store did not answer in time") from None
    except BaseException:
        await connection.disconnect()
        raise
    return replies
