"""Rate budgets kept in Redis: fixed windows counted by one script (INCR, then PEXPIRE).

A signed-in session spends its own budgets. An anonymous visitor has nothing stored (see
browser/visitor.py), so its passkey ceremonies spend per source address (browser/source.py) and,
together with every other anonymous source, one global cap 30 times higher: one source cannot
starve another, and the store holds at most a few thousand challenges whoever floods it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from ._core import StoreCore, text
from .errors import StoreCorrupt

MAX_WINDOW_S: Final = 3600
MAX_LIMIT: Final = 10_000


class BudgetRule(msgspec.Struct, frozen=True):
    """A named budget: at most `limit` uses per `window_s` seconds."""

    name: str
    limit: int
    window_s: int


class Budget(msgspec.Struct, frozen=True):
    """The answer of one spend: allowed, or refused until the window ends."""

    allowed: bool
    retry_after_s: int = 0


PASSKEY_BEGIN: Final = BudgetRule("passkey-begin", 20, 60)  # per session, or per source
PASSKEY_FINISH: Final = BudgetRule("passkey-finish", 30, 60)  # per session, or per source
ANONYMOUS_BEGIN: Final = BudgetRule("passkey-begin:anonymous", 600, 60)  # all sources together
ANONYMOUS_FINISH: Final = BudgetRule("passkey-finish:anonymous", 900, 60)  # all sources together
BROWSER: Final = BudgetRule("browser", 180, 60)  # per authenticated session
AUTHORIZE: Final = BudgetRule("authorize", 60, 60)  # per signed-in session
CLIENT_METADATA_FETCH: Final = BudgetRule("client-metadata:fetch", 60, 60)  # all sources
CLIENT_METADATA_SOURCE: Final = BudgetRule("client-metadata:source", 6, 60)  # per source
REGISTRATION: Final = BudgetRule("registration", 60, 60)  # all sources together
REGISTRATION_SOURCE: Final = BudgetRule("registration:source", 10, 60)  # per source


def retry_after_s(pttl_ms: object) -> int:
    """Turn the remaining window in milliseconds into whole seconds to wait (at least 1)."""
    if not isinstance(pttl_ms, int) or pttl_ms < 0:
        raise StoreCorrupt("a rate counter answered without a window")
    return max(1, -(-pttl_ms // 1000))


class BudgetStore:
    """Spending the rate budgets."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    async def spend_bucket(self, bucket: str, limit: int, window_s: int) -> Budget:
        """Count one use of a bucket; refuse at the limit; a corrupt counter raises StoreCorrupt."""
        if not bucket or not 1 <= limit <= MAX_LIMIT or not 1 <= window_s <= MAX_WINDOW_S:
            raise ValueError("a budget needs a name, 1..10000 uses and a window of 1 s..1 h")
        key = self.core.bucket_key("rate", bucket)
        status, rest = await self.core.script_status("budget", [key], [limit, window_s * 1000])
        if status == "ok":
            return Budget(True)
        if status == "limited" and len(rest) == 1:
            return Budget(False, retry_after_s(rest[0]))
        raise StoreCorrupt(f"the budget script answered {text(status)!r}")

    async def spend(self, rule: BudgetRule, scope: str = "") -> Budget:
        """Count one use of a named budget, per scope (a session handle, a grant) or global."""
        return await self.spend_bucket(_bucket(rule, scope), rule.limit, rule.window_s)

    async def spend_all(self, spends: Sequence[tuple[BudgetRule, str]]) -> Budget:
        """Count one use of each (rule, scope) budget, or of none when any is exhausted (then
        the longest wait among the exhausted ones); a corrupt counter raises StoreCorrupt."""
        if not spends:
            raise ValueError("spend_all needs at least one budget")
        keys: list[str] = []
        args: list[int] = []
        for rule, scope in spends:
            if not 1 <= rule.limit <= MAX_LIMIT or not 1 <= rule.window_s <= MAX_WINDOW_S:
                raise ValueError("a budget needs 1..10000 uses and a window of 1 s..1 h")
            keys.append(self.core.bucket_key("rate", _bucket(rule, scope)))
            args += [rule.limit, rule.window_s * 1000]
        status, rest = await self.core.script_status("budgets", keys, args)
        if status == "ok":
            return Budget(True)
        if status == "limited" and len(rest) == 1:
            return Budget(False, retry_after_s(rest[0]))
        raise StoreCorrupt(f"the budgets script answered {text(status)!r}")


def _bucket(rule: BudgetRule, scope: str) -> str:
    return f"{rule.name}:{scope}" if scope else rule.name
