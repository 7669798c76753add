"""The source address an anonymous visitor's budgets are kept by.

It is the socket peer, unless the peer is a proxy the operator named as trusted
(`ANGELOS_TRUSTED_PROXIES`): then X-Forwarded-For is read from the right, skipping the trusted
hops, and the first address not trusted is the source. An entry that is not an IP address ends
the walk at the trusted hop that passed it on (a shared bucket, never one per invented value).
IPv6 sources count per /64, the block one subscriber usually holds; IPv4-mapped IPv6 addresses
count as their IPv4 address. The result names a network, e.g. `203.0.113.7/32`; it is hashed
into a budget key and never logged.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Final

from aiohttp import web

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
UNKNOWN: Final = "unknown"  # a peer without an IP address (a Unix socket): one shared bucket
MAX_HOPS: Final = 32  # X-Forwarded-For entries read at most, from the right
IPV6_PREFIX: Final = 64


def parse_address(text: str) -> IPAddress | None:
    """An IP address as X-Forwarded-For or a socket names it (brackets and zone refused)."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def bucket_of(address: IPAddress) -> str:
    """The network an address counts in: itself for IPv4, its /64 for IPv6."""
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False))
    return str(ipaddress.IPv4Network(address))


def _trusted(address: IPAddress, proxies: Sequence[IPNetwork]) -> bool:
    return any(address.version == net.version and address in net for net in proxies)


def source_address(
    peer: str | None, forwarded: Sequence[str], proxies: Sequence[IPNetwork]
) -> str:
    """The bucket of a request from `peer` carrying these X-Forwarded-For header values."""
    hop = None if peer is None else parse_address(peer)
    if hop is None:
        return UNKNOWN
    if not proxies or not _trusted(hop, proxies):
        return bucket_of(hop)
    entries = [entry for value in forwarded for entry in value.split(",")]
    for entry in reversed(entries[-MAX_HOPS:]):
        address = parse_address(entry)
        if address is None:
            break
        hop = address
        if not _trusted(hop, proxies):
            break
    return bucket_of(hop)


def request_source(request: web.Request, proxies: Sequence[IPNetwork]) -> str:
    """The bucket of an aiohttp request (see source_address)."""
    return source_address(request.remote, request.headers.getall("X-Forwarded-For", []), proxies)
