"""Which Host and Origin headers /mcp accepts: the guard against DNS rebinding.

A web page on a foreign name can make a browser send requests to a loopback server once that
name resolves to 127.0.0.1; the page's name then arrives in Host and Origin. The SDK switches its
own guard on only when bound to the exact strings 127.0.0.1, localhost or ::1, so this module
builds the allowed values from the bind address itself, for every loopback spelling that
is_loopback() accepts. A server with bearer authentication accepts only the host and port of its
public resource URL, with https origins, whatever address it is bound to (a reverse proxy in
front must pass the public Host on).
"""

from __future__ import annotations

import ipaddress
from typing import Final

import msgspec

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_PORT_DIGITS: Final = frozenset("0123456789")


class HostPolicy(msgspec.Struct, frozen=True):
    """Allowed (host, port) pairs, hosts in canonical form, and the scheme origins must use."""

    authorities: frozenset[tuple[str, int]]
    scheme: str = "http"

    def allows_host(self, header: str | None) -> bool:
        """Tell whether a Host header names this server (absent or malformed: no)."""
        if header is None:
            return False
        return authority(header, DEFAULT_PORTS[self.scheme]) in self.authorities

    def allows_origin(self, header: str | None) -> bool:
        """Tell whether an Origin header is this server's own origin (absent: yes)."""
        if header is None:
            return True
        scheme, sep, rest = header.partition("://")
        if not sep or scheme != self.scheme:
            return False
        return authority(rest, DEFAULT_PORTS[scheme]) in self.authorities


def is_loopback(host: str) -> bool:
    """Tell whether a bind address is a loopback address or the name localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_policy(bind_host: str, port: int) -> HostPolicy:
    """Allow the bind address in any spelling, and the name localhost, with the bound port."""
    if not is_loopback(bind_host):
        raise ValueError("a policy for a non-loopback bind needs the public resource URL")
    hosts = {"localhost"}
    if bind_host == "localhost":  # bound on every address localhost resolves to
        hosts |= {"127.0.0.1", "::1"}
    else:
        hosts.add(ipaddress.ip_address(bind_host).compressed)
    return HostPolicy(frozenset((host, port) for host in hosts))


def resource_policy(resource_authority: tuple[str, int]) -> HostPolicy:
    """Allow only the public resource URL's host and port, and only https origins."""
    return HostPolicy(frozenset({resource_authority}), scheme="https")


def authority(value: str, default_port: int) -> tuple[str, int] | None:
    """Split `host[:port]` or `[v6][:port]` into a canonical host and a port; None if malformed.

    IP literals are compared as addresses (so 0:0:0:0:0:0:0:1 is ::1), names in lower case.
    IPv4 shorthands such as 127.1, zone ids, userinfo, paths and empty ports are malformed.
    """
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        if not bracket or not _is_ipv6(host):
            return None
        canonical = ipaddress.IPv6Address(host).compressed
    else:
        host, colon, port_part = value.partition(":")
        rest = colon + port_part
        if not host or not all(c.isalnum() or c in "-." for c in host) or not host.isascii():
            return None
        canonical = _canonical_name(host)
    if not rest:
        return canonical, default_port
    if not rest.startswith(":") or not rest[1:] or not set(rest[1:]) <= _PORT_DIGITS:
        return None
    port = int(rest[1:])
    return (canonical, port) if 0 < port < 65536 else None


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return "%" not in text


def _canonical_name(host: str) -> str:
    try:
        return ipaddress.IPv4Address(host).compressed
    except ValueError:
        return host.lower()
