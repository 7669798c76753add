"""The shape of one entry of the variable table: name, default, secrecy, rule and meaning."""

from __future__ import annotations

from typing import Any

import msgspec

from service.config.table.rules import Rule


class Group(msgspec.Struct, frozen=True):
    """A heading of the reference: the variables that configure one part of angelos."""

    key: str
    title: str
    intro: str


class Variable(msgspec.Struct, frozen=True):
    """One variable, declared once: docs, check-config and the loaders all read this entry.

    `check` checks a set value; `unset` is the value when the variable is unset or empty (None:
    no value, or one the loader derives). `shown` replaces the documented default when it is
    prose (`{}` stands for the rendered `unset`); `also` is what cross-checks add to the rule
    text. A `secret` value is never shown (check-config says set or unset, or shows a URL
    without its userinfo) and an env file holding one must be private to its owner;
    `in_env_file` is False for what only the real environment may set.
    """

    name: str
    group: str
    check: Rule
    effect: str
    unset: Any = None
    shown: str | None = None
    also: str = ""
    secret: bool = False
    in_env_file: bool = True

    @property
    def default(self) -> str:
        """The Default cell of the reference."""
        rendered = self.check.show(self.unset)
        return rendered if self.shown is None else self.shown.replace("{}", rendered)

    @property
    def rule(self) -> str:
        """The Rule cell of the reference: the rule's own text, then what relations add."""
        return self.check.text + self.also
