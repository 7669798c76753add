"""The table's entries for the send policy: human approval, the recipient allowlist and the rate.

Their rules build the values of schemas/send_policy.py directly; the one relation (a passkey
needs the first-party authorization server) is checked by `_send_policy.load_send_policy`.
"""

from __future__ import annotations

import re
from typing import Any, Final

from schemas.send_policy import APPROVALS, WINDOWS_MS, RateLimit, RecipientAllowlist
from service.config._values import dns_host_problem, is_bare_address
from service.config.table.entry import Variable
from service.config.table.rules import Choice, Rule

MAX_ALLOWED_RECIPIENTS: Final = 1000
MAX_SENDS_PER_WINDOW: Final = 100_000
_UNITS: Final = tuple(WINDOWS_MS)  # m, h, d
# At most 12 digits, as every number of the table, so int() never sees a huge one.
_RATE: Final = re.compile(rf"([1-9][0-9]{{0,11}})/([{''.join(_UNITS)}])", re.ASCII)


def _is_entry(entry: str) -> bool:
    """Tell whether one allowlist entry is a bare address or `@` and a DNS domain."""
    if entry.startswith("@"):
        return dns_host_problem(entry[1:]) is None
    return is_bare_address(entry)


class Recipients(Rule, frozen=True):
    """Comma-separated bare addresses and `@domain` entries; the value is a RecipientAllowlist.

    Entries are personal data, so a problem names a bad one by its 1-based position only.
    """

    max_entries: int

    @property
    def text(self) -> str:
        return (
            f"1-{self.max_entries} comma-separated bare addresses (`ann@example.org`) or whole"
            " domains (`@example.org`), spaces around commas allowed"
        )

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        entries = [entry.strip(" ") for entry in raw.split(",")]
        if len(entries) > self.max_entries:
            return None, f"must list at most {self.max_entries} entries"
        for position, entry in enumerate(entries, 1):
            if not entry:
                return None, f"entry {position} is empty"
            if not _is_entry(entry):
                return None, f"entry {position} is neither a bare address nor @domain"
        # The list matches case-insensitively, so it holds each entry once, lower-case.
        return RecipientAllowlist(entries=tuple(sorted({e.lower() for e in entries}))), None


class SendRate(Rule, frozen=True):
    """`N/m`, `N/h` or `N/d` with N in 1..max_count; the value is a RateLimit."""

    max_count: int

    @property
    def text(self) -> str:
        forms = [f"`N/{unit}`" for unit in _UNITS]
        return (
            ", ".join(forms[:-1]) + f" or {forms[-1]} (a minute, an hour, a day) with N"
            f" 1-{self.max_count}, such as `20/h`"
        )

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        match = _RATE.fullmatch(raw)
        if match is None or int(match.group(1)) > self.max_count:
            forms = ", ".join(f"N/{unit}" for unit in _UNITS[:-1]) + f" or N/{_UNITS[-1]}"
            return None, f"must be {forms} with N 1-{self.max_count}, such as 20/h"
        count, unit = int(match.group(1)), match.group(2)
        return RateLimit(count=count, window_ms=WINDOWS_MS[unit], text=raw), None


SEND_POLICY_VARIABLES: Final = (
    Variable(
        "ANGELOS_SEND_APPROVAL",
        "send_policy",
        Choice(APPROVALS),
        "human approval every send needs before its claim; frozen into each preparation"
        " (docs/tools.md, Human approval)",
        unset="off",
        also="; `passkey` and `elicitation_or_passkey` need `ANGELOS_OAUTH_ENABLED=1` (the"
        " approval page is the first-party authorization server's)",
    ),
    Variable(
        "MAIL_SEND_ALLOWED_RECIPIENTS",
        "send_policy",
        Recipients(MAX_ALLOWED_RECIPIENTS),
        "the only recipients (To, Cc and Bcc) a send may have; `@example.org` matches that"
        " exact domain, not its subdomains; matched case-insensitively; check-config shows"
        " only how many entries there are",
        shown="unset (every recipient)",
    ),
    Variable(
        "MAIL_SEND_RATE_LIMIT",
        "send_policy",
        SendRate(MAX_SENDS_PER_WINDOW),
        "at most N sends are claimed in any sliding window of a minute, an hour or a day; a"
        " refused send answers `rate_limited` and stays usable",
        shown="unset (no limit)",
    ),
)
