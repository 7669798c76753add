"""The owner's send policy: human approval, the recipient allowlist and the send rate limit.

Pure values and checks; the configuration builds them, prepare freezes them into the ledger
and the claim enforces them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from email.utils import parseaddr
from typing import Final, Literal

from msgspec import Struct

Approval = Literal["off", "elicitation", "passkey", "elicitation_or_passkey"]
RequiredApproval = Literal["elicitation", "passkey", "elicitation_or_passkey"]
ApprovalMode = Literal["elicitation", "passkey"]  # how one approval was given
APPROVALS: Final[tuple[Approval, ...]] = ("off", "elicitation", "passkey", "elicitation_or_passkey")
WINDOWS_MS: Final = {"m": 60_000, "h": 3_600_000, "d": 86_400_000}


def accepts(required: RequiredApproval, mode: ApprovalMode) -> bool:
    """Tell whether an approval given by `mode` satisfies what the preparation requires."""
    return required == mode or required == "elicitation_or_passkey"


class RecipientAllowlist(Struct, frozen=True):
    """Addresses (`ann@example.org`) and whole domains (`@example.org`), lower-case.

    A domain entry matches that exact domain, not its subdomains.
    """

    entries: tuple[str, ...]

    def allows(self, address: str) -> bool:
        """Tell whether one address is on the list (case-insensitive).

        A header form (`"Ann" <ann@example.org>`) is judged by its address alone; one that does
        not parse is judged as written, and so refused.
        """
        folded = (parseaddr(address)[1] or address).lower()
        _, at, domain = folded.rpartition("@")
        return folded in self.entries or (bool(at) and "@" + domain in self.entries)

    def refused(
        self, to: Sequence[str], cc: Sequence[str], bcc: Sequence[str],
        envelope: Sequence[str] = (),
    ) -> list[str]:  # fmt: skip
        """Name each refused recipient by its field and position (`to[0]`, `bcc[2]`), in order.

        The envelope (the addresses the message actually goes to) is checked too: a refused
        one that no header names is reported as `envelope[i]`.
        """
        named = [
            f"{field}[{index}]"
            for field, addresses in (("to", to), ("cc", cc), ("bcc", bcc))
            for index, address in enumerate(addresses)
            if not self.allows(address)
        ]
        if named:
            return named
        return [f"envelope[{i}]" for i, address in enumerate(envelope) if not self.allows(address)]

    @property
    def digest(self) -> str:
        """The SHA-256 of the sorted entries: what a preparation records of the list."""
        return hashlib.sha256("\n".join(sorted(set(self.entries))).encode()).hexdigest()


class RateLimit(Struct, frozen=True):
    """At most `count` claims in any sliding window of `window_ms`."""

    count: int
    window_ms: int
    text: str  # as configured, e.g. `20/h`


class SendPolicy(Struct, frozen=True):
    """What the owner requires of every send."""

    approval: Approval = "off"
    allowlist: RecipientAllowlist | None = None
    rate: RateLimit | None = None

    @property
    def required(self) -> RequiredApproval | None:
        """The approval a new preparation requires, or None."""
        return None if self.approval == "off" else self.approval


NO_POLICY: Final = SendPolicy()
