"""The typed rules of the variable table: each checks a value and writes its own rule text.

A rule's `text` is the Rule cell of docs/configuration.md and its problems are the words
check-config prints after "NAME: ", so the two cannot drift apart. `parse` returns the typed
value, or None with the broken rule; it never sees an unset variable (the entry's `unset`
value stands for that).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from typing import Any

import msgspec

from schemas.scopes import parse_scope_list
from service.config._urls import parse_redis_url
from service.config._values import (
    dns_host_problem,
    has_control,
    parse_decimal,
    parse_go_duration,
)

_MS_PER_MIN = 60_000


def _plain(text: str) -> str:
    """A rule text as a problem says it: Markdown code marks dropped."""
    return text.replace("`", "")


class Rule(msgspec.Struct, frozen=True):
    """What a variable's value must be; subclasses check it."""

    @property
    def text(self) -> str:
        """The rule as docs/configuration.md states it."""
        raise NotImplementedError

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        """The typed value and None, or None and the broken rule (without the name)."""
        raise NotImplementedError

    def show(self, value: object) -> str:
        """The documented default for the value the variable has when unset."""
        return "unset" if value is None else f"`{value}`"


class Switch(Rule, frozen=True):
    """On for exactly `1`, off for anything else; never a problem."""

    @property
    def text(self) -> str:
        return "`1` is on"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        return raw == "1", None

    def show(self, value: object) -> str:
        return "off"


class Int(Rule, frozen=True):
    """A plain decimal of at most 12 digits in low..high; test builds may lower the bound."""

    low: int
    high: int | None = None
    test_low: int | None = None

    @property
    def text(self) -> str:
        text = f"an integer >= {self.low}" if self.high is None else f"{self.low}-{self.high}"
        if self.test_low is None:
            return text
        test = f">= {self.test_low}" if self.high is None else f"{self.test_low}-{self.high}"
        return f"{text} ({test} in test mode)"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        low = self.low if not test_mode or self.test_low is None else self.test_low
        number = parse_decimal(raw)
        if number is None or number < low or (self.high is not None and number > self.high):
            span = f">= {low}" if self.high is None else f"{low}..{self.high}"
            return None, f"must be an integer {span}"
        return number, None


class Positive(Rule, frozen=True):
    """A plain decimal of at most 12 digits, at least 1 (relations bound it further)."""

    @property
    def text(self) -> str:
        return "a positive integer"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        number = parse_decimal(raw)
        if number is None or number < 1:
            return None, "must be a positive integer"
        return number, None


def _duration(ms: int, *, spaced: bool) -> str:
    if ms % _MS_PER_MIN == 0:
        return f"{ms // _MS_PER_MIN}{' min' if spaced else 'm'}"
    return f"{ms // 1000}{' s' if spaced else 's'}"


class Duration(Rule, frozen=True):
    """A Go duration (`30s`, `1m30s`) from low_ms to high_ms; the value is in milliseconds."""

    low_ms: int
    high_ms: int

    @property
    def text(self) -> str:
        low, high = _duration(self.low_ms, spaced=True), _duration(self.high_ms, spaced=True)
        return f"a duration such as `30s`, `2m` or `1m30s`, from {low} to {high}"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        nanoseconds = parse_go_duration(raw)
        if nanoseconds is None:
            return None, "must be a duration such as 30s, 2m or 1m30s"
        if not self.low_ms * 1_000_000 <= nanoseconds <= self.high_ms * 1_000_000:
            low, high = _duration(self.low_ms, spaced=False), _duration(self.high_ms, spaced=False)
            return None, f"must be between {low} and {high}"
        return nanoseconds // 1_000_000, None

    def show(self, value: object) -> str:
        return f"`{_duration(value, spaced=False)}`" if isinstance(value, int) else "unset"


class Choice(Rule, frozen=True):
    """One of a few exact words; with one word, that word or unset."""

    options: tuple[str, ...]

    @property
    def text(self) -> str:
        words = [f"`{option}`" for option in self.options]
        if len(words) == 1:
            return f"unset or {words[0]}"
        return ", ".join(words[:-1]) + f" or {words[-1]}"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        if raw in self.options:
            return raw, None
        if len(self.options) > 2:
            return None, "must be one of " + ", ".join(self.options)
        return None, f"must be {_plain(self.text)}"


class Matches(Rule, frozen=True):
    """Text accepted by a regular expression (whole value) or a predicate."""

    accepts: re.Pattern[str] | Callable[[str], bool]
    rule: str
    problem: str = ""  # default: "must be " + the rule without code marks

    @property
    def text(self) -> str:
        return self.rule

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        test = self.accepts
        ok = test.fullmatch(raw) is not None if isinstance(test, re.Pattern) else test(raw)
        return (raw, None) if ok else (None, self.problem or f"must be {_plain(self.rule)}")


class Token(Rule, frozen=True):
    """1..max_chars characters, none of them whitespace or a control character."""

    max_chars: int

    @property
    def text(self) -> str:
        return f"1-{self.max_chars} characters, no whitespace or control characters"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        if (
            1 <= len(raw) <= self.max_chars
            and not any(ch.isspace() for ch in raw)
            and not has_control(raw)
        ):
            return raw, None
        return None, f"must be 1-{self.max_chars} characters without whitespace or controls"


class Scopes(Rule, frozen=True):
    """A scope list as the authorization server grants it."""

    @property
    def text(self) -> str:
        return "1-3 of `mail.read` `mail.write` `mail.send`, single spaces, with `mail.read`"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        scopes = parse_scope_list(raw)
        if scopes is None:
            return None, (
                "must be 1-3 of mail.read mail.write mail.send joined by single spaces,"
                " without duplicates, including mail.read"
            )
        return scopes, None

    def show(self, value: object) -> str:
        scopes = value if isinstance(value, tuple) else ()
        return f"`{' '.join(scopes)}`"


class Networks(Rule, frozen=True):
    """Comma-separated IP addresses or CIDR blocks (no host bits set); the value is a tuple of
    ipaddress networks, a bare address being its /32 or /128."""

    max_entries: int

    @property
    def text(self) -> str:
        return (
            f"1-{self.max_entries} comma-separated IP addresses or CIDR blocks such as"
            " `10.0.0.0/8`, no host bits set"
        )

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        entries = [entry.strip() for entry in raw.split(",")]
        networks = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry, strict=True))
            except ValueError:
                networks = []
                break
        if not networks or len(networks) > self.max_entries:
            return None, (
                f"must be 1-{self.max_entries} comma-separated IP addresses or CIDR blocks"
                " without host bits set"
            )
        return tuple(networks), None

    def show(self, value: object) -> str:
        return "none"


class Host(Rule, frozen=True):
    """A DNS host name, never an IP literal."""

    @property
    def text(self) -> str:
        return "a DNS host name, not an IP literal"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        problem = dns_host_problem(raw)
        return (None, problem) if problem else (raw, None)


class ReadableFile(Rule, frozen=True):
    """The path of a file this process can read (checked when the configuration loads)."""

    @property
    def text(self) -> str:
        return "an existing readable file"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        try:
            readable = os.path.isfile(raw) and os.access(raw, os.R_OK)
        except (OSError, ValueError):  # NUL bytes or unencodable names
            readable = False
        return (raw, None) if readable else (None, "must name an existing readable file")


class AbsolutePath(Rule, frozen=True):
    """An absolute path without control characters; lenient: anything else is ignored."""

    lenient: bool = False

    @property
    def text(self) -> str:
        if self.lenient:
            return "an absolute path; anything else is ignored"
        return "an absolute path without control characters"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        if os.path.isabs(raw) and not has_control(raw):
            return raw, None
        return None, None if self.lenient else f"must be {self.text}"


class RedisUrl(Rule, frozen=True):
    """A Redis URL the ledger may use, or `off`."""

    @property
    def text(self) -> str:
        return (
            "`redis://` on loopback, `rediss://` elsewhere, no query; `redis+cluster://` or "
            "`rediss+cluster://` for a Redis Cluster seed; or `off`"
        )

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        if raw == "off":
            return raw, None
        _, problem = parse_redis_url(raw)
        return (None, problem) if problem else (raw, None)


class Refused(Rule, frozen=True):
    """Read only to refuse: any value is a problem."""

    problem: str

    @property
    def text(self) -> str:
        return "any value is refused"

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        return None, self.problem


class Custom(Rule, frozen=True):
    """A rule too irregular for the family (JSON documents, PEM keys, provider relations).

    `checked_by` names the loader function that applies it; the entry still holds its text.
    """

    rule: str
    checked_by: str

    @property
    def text(self) -> str:
        return self.rule

    def parse(self, raw: str, test_mode: bool = False) -> tuple[Any, str | None]:
        raise TypeError(f"{self.checked_by} checks this variable")
