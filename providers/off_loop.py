"""CPU-bound work off the event loop, on a small dedicated thread pool.

Parsing a 5 MiB message, composing one, or summarizing a page of 64 KiB header sections takes
tens to hundreds of milliseconds of pure computation; on the loop it would hold every other
client (and the ledger's lease refresh) for that long. The work handed here is bounded by the
input limits and linear in them. Two threads are enough: they share one interpreter lock, so
more would only queue behind each other while slowing the loop's turns.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="angelos-cpu")


async def off_loop(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `work(*args, **kwargs)` on the CPU pool (with the caller's context) and await it."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, work, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_POOL, call)
