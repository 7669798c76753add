"""The shape of one entry of the variable table, and the rules several entries share."""

from __future__ import annotations

import msgspec


class Group(msgspec.Struct, frozen=True):
    """A heading of the reference: the variables that configure one part of angelos."""

    key: str
    title: str
    intro: str


class Variable(msgspec.Struct, frozen=True):
    """One variable: its default as users see it, the rule its value must follow, its effect.

    A `secret` value is never shown (check-config says set or unset, or shows a URL without
    its userinfo) and an env file holding one must be private to its owner; `in_env_file` is
    False for what only the real environment may set.
    """

    name: str
    group: str
    default: str
    rule: str
    effect: str
    secret: bool = False
    in_env_file: bool = True


SCOPES_RULE = "1-3 of `mail.read` `mail.write` `mail.send`, single spaces, with `mail.read`"
HTTPS_RULE = (
    "`https` URL, no userinfo, query, fragment or `%`; a public DNS host with a dot, no IP, port"
    " absent or 443 (unless `MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1`)"
)
TOKEN_RULE = "1-16384 characters, no whitespace or control characters"
