"""URL rules: the public HTTPS rule of the MCP_* URLs and the Redis store URL."""

from __future__ import annotations

import ipaddress
import re

import msgspec

from service.config._rules import dns_host_problem, looks_like_ip_literal, parse_decimal, parse_port

_PUBLIC_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_RESERVED_SUFFIXES = (".localhost", ".local", ".internal", ".invalid", ".test", ".onion")
_URL_FORBIDDEN = frozenset("\r\n\t \\?#")
_MAX_REDIS_DB = 100_000


class HttpsUrl(msgspec.Struct, frozen=True):
    """The parts of an accepted public HTTPS URL that the relation checks need."""

    host: str  # lower-cased
    path: str  # "" or starting with "/"


def parse_public_https_url(text: str) -> tuple[HttpsUrl | None, str]:
    """Apply the public HTTPS URL rule; return the parts, or None and the broken rule."""
    if not text:
        return None, "required"
    if any(ch in _URL_FORBIDDEN for ch in text):
        return None, "must not contain whitespace, backslashes, '?' or '#'"
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in text):
        return None, "must be printable ASCII"
    scheme, sep, rest = text.partition(":")
    if not sep or scheme.lower() != "https":
        return None, "must be an https URL"
    if not rest.startswith("//"):
        return None, "must be an absolute https URL with a host"
    authority, slash, tail = rest[2:].partition("/")
    path = slash + tail
    if "@" in authority:
        return None, "must not contain userinfo"
    if "%" in authority or "%" in path:
        return None, "must not contain percent-encoding"
    if authority.startswith("["):
        return None, "host must not be an IP literal"
    host, colon, port = authority.partition(":")
    if colon and port != "443":
        return None, "port must be absent or 443"
    host = host.lower()
    host_problem = _public_host_problem(host)
    if host_problem is not None:
        return None, host_problem
    if any(segment in (".", "..") for segment in path.split("/")):
        return None, "path must not contain '.' or '..' segments"
    return HttpsUrl(host=host, path=path), ""


def _public_host_problem(host: str) -> str | None:
    if not host:
        return "must name a host"
    if looks_like_ip_literal(host):
        return "host must not be an IP literal"
    if "." not in host:
        return "host must be a public DNS name containing a dot"
    if len(host) > 253:
        return "host must be at most 253 characters"
    if host.endswith(_RESERVED_SUFFIXES):
        return "host must not end in .localhost, .local, .internal, .invalid, .test or .onion"
    if not all(_PUBLIC_LABEL.fullmatch(label) for label in host.split(".")):
        return "host labels must be 1-63 of a-z, 0-9 and inner hyphens"
    return None


class RedisTarget(msgspec.Struct, frozen=True):
    """A validated Redis URL, split so the credential-free parts can be shown."""

    tls: bool
    host: str
    port: int | None
    db: int | None
    has_credentials: bool

    def redacted(self) -> str:
        """Return the URL without its userinfo, for operator-facing output."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port is None else f":{self.port}"
        db = "" if self.db is None else f"/{self.db}"
        return f"{'rediss' if self.tls else 'redis'}://{host}{port}{db}"


def parse_redis_url(text: str) -> tuple[RedisTarget | None, str]:
    """Validate a redis:// (loopback only) or rediss:// URL; return it, or None and the rule."""
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in text):
        return None, "must be printable ASCII without spaces"
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("redis", "rediss"):
        return None, "must be a redis:// or rediss:// URL, or the value off"
    if "?" in rest or "#" in rest:
        # Query options can switch off certificate checks in redis-py; none are accepted.
        return None, "must not carry a query or fragment"
    authority, _, path = rest.partition("/")
    userinfo, at, hostport = authority.rpartition("@")
    host, port_text = _split_host_port(hostport)
    if host is None:
        return None, "must name a host, optionally with :port"
    port: int | None = None
    if port_text is not None:
        port = parse_port(port_text)
        if port is None:
            return None, "port must be an integer 1..65535"
    db: int | None = None
    if path:
        db = parse_decimal(path)
        if db is None or db > _MAX_REDIS_DB:
            return None, "path must be empty or a database number"
    if not _is_ip(host) and dns_host_problem(host) is not None:
        return None, "host must be a DNS host name or an IP address"
    tls = scheme == "rediss"
    if not tls and not _is_loopback(host):
        return None, "redis:// is only allowed for loopback hosts; use rediss:// elsewhere"
    has_credentials = bool(at) and userinfo not in ("", ":")
    return RedisTarget(tls=tls, host=host, port=port, db=db, has_credentials=has_credentials), ""


def _split_host_port(hostport: str) -> tuple[str | None, str | None]:
    if hostport.startswith("["):
        inner, bracket, after = hostport[1:].partition("]")
        if not bracket or not inner or not _is_ip(inner):
            return None, None
        if not after:
            return inner, None
        if not after.startswith(":"):
            return None, None
        return inner, after[1:]
    host, colon, port = hostport.partition(":")
    if not host:
        return None, None
    return host, (port if colon else None)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
