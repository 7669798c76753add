"""Outbound destination safety for mail clients: vetted DNS answers and the TLS context.

Every mail connection (IMAP, SMTP) resolves its host once, refuses the whole host when any
answer is non-public (loopback and private addresses are allowed only by
MAIL_ALLOW_PRIVATE_HOSTS), and dials the vetted numeric addresses itself, so no second lookup
can reopen a DNS-rebinding window.

Pinned provider hosts (imap.gmail.com, oauth2.googleapis.com, ...) resolve through DNS like any
other. The one exception is the test seam `reroute_for_tests`: a Python call, made only by the
test tree's launcher, that sends named pinned destinations to loopback listeners and trusts one
extra CA for them. No environment variable, file or flag of the product reaches it, and the TLS
certificate is still verified against the pinned host name.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from typing import Any

from schemas.errors import ServiceUnavailable

MAX_ADDRESSES = 32
# The test seam: (host, port) → loopback (address, port), and the CA that signs its listeners.
# Empty in every process the product starts itself.
_REROUTED: dict[tuple[str, int], tuple[str, int]] = {}
_REROUTED_CA: list[str] = []

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
SockAddr = tuple[Any, ...]

# Non-public destinations for mail clients (224/3 and 3fff::/20 included).
_BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/3",
    )
)
_BLOCKED_V6 = tuple(
    ipaddress.IPv6Network(n) for n in ("2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20")
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_RESERVED_V4 = ipaddress.IPv4Network("240.0.0.0/4")  # includes the limited broadcast


def is_public_address(address: IPAddress) -> bool:
    """Tell whether a mail host may be dialled at `address` (public, or private when allowed)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return False
        mapped = address.ipv4_mapped
        if mapped is not None:
            return is_public_address(mapped)
        if address not in _GLOBAL_UNICAST_V6 or any(address in n for n in _BLOCKED_V6):
            return False
        return address.is_global
    if any(address in n for n in _BLOCKED_V4):
        return False
    return address.is_global


def is_dialable_private_address(address: IPAddress) -> bool:
    """Tell whether `address` is usable when private hosts are allowed (not 0/8, multicast...)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_unspecified or address.is_multicast or address in _RESERVED_V4:
        return False
    # ::1 sits in the reserved ::/8 block, so loopback and private ranges are checked first.
    if address.is_loopback or address.is_private or address.is_link_local:
        return True
    return not address.is_reserved


def reroute_for_tests(routes: dict[tuple[str, int], tuple[str, int]], ca_file: str) -> None:
    """Test seam: dial loopback listeners for these pinned destinations, trusting `ca_file`."""
    for (host, port), (address, to_port) in routes.items():
        if not ipaddress.ip_address(address).is_loopback:
            raise ValueError("the test seam reroutes to loopback only")
        _REROUTED[(host.lower(), port)] = (address, to_port)
    _REROUTED_CA[:] = [ca_file]
    tls_context.cache_clear()


def clear_reroutes_for_tests() -> None:
    """Test seam: forget every reroute and the extra CA, so pinned hosts resolve as usual."""
    _REROUTED.clear()
    _REROUTED_CA.clear()
    tls_context.cache_clear()


def rerouted(host: str, port: int) -> bool:
    """Tell whether the test seam reroutes this destination (never, outside the test tree)."""
    return (host.lower(), port) in _REROUTED


async def resolve_destination(
    host: str, port: int, *, allow_private_hosts: bool
) -> list[tuple[int, SockAddr]]:
    """Resolve `host` once and vet every answer; refuse the whole host if any answer is bad."""
    route = _REROUTED.get((host.lower(), port))
    if route is not None:
        return [(int(socket.AF_INET6 if ":" in route[0] else socket.AF_INET), route)]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (OSError, UnicodeError):
        raise ServiceUnavailable("the mail host name does not resolve") from None
    answers: list[tuple[int, SockAddr]] = []
    for info in infos:
        if info[0] not in (socket.AF_INET, socket.AF_INET6):
            continue
        entry = (int(info[0]), tuple(info[4]))
        if entry not in answers:
            answers.append(entry)
    if not 1 <= len(answers) <= MAX_ADDRESSES:
        raise ServiceUnavailable("the mail host name resolves to an unusable address set")
    for family, sockaddr in answers:
        try:
            address = ipaddress.ip_address(str(sockaddr[0]))
        except ValueError:
            raise ServiceUnavailable("the mail host resolves to an invalid address") from None
        zoned = family == socket.AF_INET6 and len(sockaddr) > 3 and sockaddr[3] != 0
        allowed = (
            is_dialable_private_address(address)
            if allow_private_hosts
            else not zoned and is_public_address(address)
        )
        if not allowed:
            raise ServiceUnavailable("the mail host resolves to a non-public address")
    return answers


@functools.lru_cache(maxsize=8)
def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Build the client TLS context: TLS ≥ 1.2, system roots plus `ca_file`, hostname checks."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)  # system roots
    for extra in (ca_file, *_REROUTED_CA):
        if extra:
            context.load_verify_locations(cafile=extra)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


async def dial(answers: list[tuple[int, SockAddr]]) -> socket.socket | None:
    """Connect to the vetted addresses in order; return the first socket, or None if all fail."""
    loop = asyncio.get_running_loop()
    for family, sockaddr in answers:
        # Named TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
        # and without it a short write after a long one (SMTP's end-of-data marker after the
        # body) waits ~40 ms for the peer's delayed ACK (Nagle).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, sockaddr)
        except OSError:
            sock.close()
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    return None
