"""Redirect URIs of native apps (RFC 8252) beside the https rule, and the one matching rule.

Three kinds of callback exist:
- https: the public rule of `_urls.redirect_uri_problem`, matched exactly, for every client;
- loopback (RFC 8252 §7.3): `http://127.0.0.1`, `http://[::1]` or `http://localhost`, with or
  without a port, and a path; at request time any port matches, the path and query exactly;
- private-use scheme (§7.1): `<scheme>:<rest>`, matched exactly. The scheme is RFC 3986 shaped,
  lower-case, and contains a period (reverse DNS, `com.example.app:/cb`), or is one of the
  dot-less editor schemes real MCP clients ship with (`cursor`, `vscode`, `vscode-insiders`,
  `windsurf`), which cannot be changed by the owner and are only ever used by a client the owner
  configured as native or one whose metadata document names it.
The last two are only for native clients: a configured client with `"native": true`, or a
client metadata document (the consent page then names where the answer goes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

from service.config._urls import MAX_REDIRECT_URI_CHARS, RESPONSE_PARAMETERS, redirect_uri_problem

LOOPBACK_HOSTS: Final = ("127.0.0.1", "[::1]", "localhost")
DOTLESS_SCHEMES: Final = frozenset({"cursor", "vscode", "vscode-insiders", "windsurf"})
# Schemes that are web, script or local-file schemes, never an app's own.
FORBIDDEN_SCHEMES: Final = frozenset(
    {"http", "https", "javascript", "data", "file", "blob", "about", "ws", "wss", "ftp", "vbscript"}
)
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*", re.ASCII)
_AUTHORITY = re.compile(r"[a-z0-9._-]*", re.ASCII)
_PORT = re.compile(r"[1-9][0-9]{0,4}", re.ASCII)
Kind = Literal["https", "loopback", "private-use"]


def kind_of(uri: str) -> Kind:
    """The kind a (checked) redirect URI is of."""
    if uri.startswith("https://"):
        return "https"
    if uri.startswith("http://"):
        return "loopback"
    return "private-use"


def callback_problem(uri: str, *, native: bool) -> str | None:
    """Explain why uri is not an acceptable redirect URI for this kind of client, or None."""
    if not 1 <= len(uri) <= MAX_REDIRECT_URI_CHARS:
        return f"must be 1-{MAX_REDIRECT_URI_CHARS} characters"
    if uri.startswith("https://") or not native:
        return redirect_uri_problem(uri)
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in uri) or "\\" in uri:
        return "must be printable ASCII without whitespace or backslashes"
    if "#" in uri:
        return "must not have a fragment"
    if "%" in uri:
        return "must not contain percent-encoding"
    if uri.startswith("http://"):
        return _loopback_problem(uri) or _query_problem(uri)
    return _private_scheme_problem(uri) or _query_problem(uri)


def _split_loopback(uri: str) -> tuple[str, str | None, str] | None:
    """(host as written, port text or None, path and query) of an http:// URI; None if no path."""
    rest = uri[len("http://") :]
    authority, slash, tail = rest.partition("/")
    if not slash:
        return None
    if authority.startswith("[::1]"):
        host, after = "[::1]", authority[len("[::1]") :]
    else:
        host, colon, port = authority.partition(":")
        after = ":" + port if colon else ""
    if after and not after.startswith(":"):
        return None
    return host, (after[1:] if after else None), "/" + tail


def _loopback_problem(uri: str) -> str | None:
    parts = _split_loopback(uri)
    if parts is None:
        return "an http callback must be http://127.0.0.1, http://[::1] or http://localhost + /path"
    host, port, path_and_query = parts
    if host not in LOOPBACK_HOSTS:
        return "an http callback must be on 127.0.0.1, [::1] or localhost (only https elsewhere)"
    if port is not None and not _port_ok(port):
        return "port must be absent or 1..65535 without leading zeros"
    path = path_and_query.partition("?")[0]
    if any(segment in (".", "..") for segment in path.split("/")):
        return "path must not contain '.' or '..' segments"
    return None


def _private_scheme_problem(uri: str) -> str | None:
    scheme, colon, rest = uri.partition(":")
    if not colon or _SCHEME.fullmatch(scheme) is None:
        return "must be an https, loopback http or private-use scheme URI (lower-case scheme)"
    if scheme in FORBIDDEN_SCHEMES:
        return f"must not use the {scheme}: scheme"
    if "." not in scheme and scheme not in DOTLESS_SCHEMES:
        return "a private-use scheme must contain a period (reverse DNS, e.g. com.example.app)"
    if not rest.lstrip("/"):
        return "a private-use scheme URI must have a path"
    authority = rest[2:].partition("/")[0] if rest.startswith("//") else ""
    if _AUTHORITY.fullmatch(authority) is None:
        return "the part after // must be a name of a-z, 0-9, '.', '-' and '_' (no userinfo, port)"
    path = rest.partition("?")[0]
    if any(segment in (".", "..") for segment in path.split("/")):
        return "path must not contain '.' or '..' segments"
    return None


def _query_problem(uri: str) -> str | None:
    _, question, query = uri.partition("?")
    if question and not query:
        return "must not end in a bare '?'"
    names = {pair.partition("=")[0] for pair in query.split("&")} if query else set()
    if names & RESPONSE_PARAMETERS:
        return "query must not hold code, error, error_description, state or iss"
    return None


def _port_ok(port: str) -> bool:
    return _PORT.fullmatch(port) is not None and int(port) <= 65535


def callback_key(uri: str) -> str:
    """What makes two registered URIs the same callback: a loopback one without its port."""
    if kind_of(uri) != "loopback":
        return uri
    parts = _split_loopback(uri)
    if parts is None:
        return uri
    host, _, path_and_query = parts
    return f"http://{host}{path_and_query}"


def redirect_uri_matches(registered: Iterable[str], presented: str) -> bool:
    """The one matching rule, at authorization and at token exchange: a registered https or
    private-use URI matches only itself; a registered loopback URI matches the same host, path
    and query with any port (RFC 8252 §7.3), or none."""
    for uri in registered:
        if uri == presented:
            return True
        if kind_of(uri) == "loopback" and kind_of(presented) == "loopback":
            parts = _split_loopback(presented)
            if (
                parts is not None
                and (parts[1] is None or _port_ok(parts[1]))
                and callback_key(presented) == callback_key(uri)
            ):
                return True
    return False
