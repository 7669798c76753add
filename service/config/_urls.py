"""URL rules: the public HTTPS rule of the MCP_* URLs and the Redis store URL."""

from __future__ import annotations

import ipaddress
import re

import msgspec

from service.config._values import (
    dns_host_problem,
    looks_like_ip_literal,
    parse_decimal,
    parse_port,
)

_PUBLIC_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_RESERVED_SUFFIXES = (".localhost", ".local", ".internal", ".invalid", ".test", ".onion")
_URL_FORBIDDEN = frozenset("\r\n\t \\?#")
_PORT_TEXT = re.compile(r"[1-9][0-9]{0,4}", re.ASCII)
_HTTPS_PORT = 443
MAX_REDIRECT_URI_CHARS = 2048
# An authorization response adds these to the callback; a registered URI must not hold them.
RESPONSE_PARAMETERS = frozenset({"code", "error", "error_description", "state", "iss"})
_MAX_REDIS_DB = 100_000


class HttpsUrl(msgspec.Struct, frozen=True):
    """The parts of an accepted HTTPS URL that the relation checks and derived URLs need."""

    host: str  # lower-cased; an IPv6 address without brackets, in compressed form
    port: int  # the effective port: 443 when absent
    path: str  # "" or starting with "/"
    origin: str  # "https://" + host[:port] as written, without a port of 443


def parse_public_https_url(
    text: str, *, allow_private_hosts: bool = False
) -> tuple[HttpsUrl | None, str]:
    """Apply the public HTTPS URL rule; return the parts, or None and the broken rule.

    allow_private_hosts lifts only the host and port rules: IP literals (IPv6 in brackets),
    single-label and reserved-suffix names, and any port 1..65535 are then accepted.
    """
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
    written_host, port_text = _split_authority(authority)
    if allow_private_hosts:
        host, port, problem = _private_host_port(written_host, port_text)
    else:
        host, port, problem = _public_host_port(written_host, port_text)
    if problem:
        return None, problem
    if any(segment in (".", "..") for segment in path.split("/")):
        return None, "path must not contain '.' or '..' segments"
    origin = f"https://{written_host}" + ("" if port == _HTTPS_PORT else f":{port}")
    return HttpsUrl(host=host, port=port, path=path, origin=origin), ""


def redirect_uri_problem(text: str) -> str | None:
    """Explain why text is not an acceptable OAuth redirect URI, or return None.

    The host rules are the public ones and are never lifted: a client is a real remote app.
    """
    if not 1 <= len(text) <= MAX_REDIRECT_URI_CHARS:
        return f"must be 1-{MAX_REDIRECT_URI_CHARS} characters"
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in text) or "\\" in text:
        return "must be printable ASCII without whitespace or backslashes"
    if not text.startswith("https://"):
        return "must be an https:// URL"
    if "#" in text:
        return "must not have a fragment"
    if "%" in text:
        return "must not contain percent-encoding"
    rest = text[len("https://") :]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path_and_query = rest[:cut], rest[cut:]
    if "@" in authority:
        return "must not contain userinfo"
    written_host, port_text = _split_authority(authority)
    _, _, problem = _public_host_port(written_host, port_text)
    if problem:
        return problem
    if written_host != written_host.lower():
        return "host must be lower-case"
    path, question, query = path_and_query.partition("?")
    if any(segment in (".", "..") for segment in path.split("/")):
        return "path must not contain '.' or '..' segments"
    if question and not query:
        return "must not end in a bare '?'"
    names = {pair.partition("=")[0] for pair in query.split("&")} if query else set()
    if names & RESPONSE_PARAMETERS:
        return "query must not hold code, error, error_description, state or iss"
    return None


def _split_authority(authority: str) -> tuple[str, str | None]:
    """Split host (brackets kept) from the port text, which is None when there is no colon."""
    if authority.startswith("["):
        inner, bracket, after = authority.partition("]")
        if bracket and after.startswith(":"):
            return inner + bracket, after[1:]
        return authority, None  # unless it ends at "]", the host check refuses it
    host, colon, port = authority.partition(":")
    return host, (port if colon else None)


def _public_host_port(written_host: str, port_text: str | None) -> tuple[str, int, str]:
    if written_host.startswith("["):
        return "", 0, "host must not be an IP literal"
    if port_text is not None and port_text != "443":
        return "", 0, "port must be absent or 443"
    host = written_host.lower()
    return host, _HTTPS_PORT, _public_host_problem(host) or ""


def _private_host_port(written_host: str, port_text: str | None) -> tuple[str, int, str]:
    port = _HTTPS_PORT
    if port_text is not None:
        if _PORT_TEXT.fullmatch(port_text) is None or int(port_text) > 65535:
            return "", 0, "port must be absent or 1..65535 without leading zeros"
        port = int(port_text)
    if written_host.startswith("["):
        inner = written_host[1:-1] if written_host.endswith("]") else ""
        try:
            address = ipaddress.IPv6Address(inner)
        except ValueError:
            return "", 0, "a bracketed host must be an IPv6 address"
        return address.compressed, port, ""
    host = written_host.lower()
    return host, port, _private_host_problem(host) or ""


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
    return _labels_problem(host)


def _private_host_problem(host: str) -> str | None:
    if not host:
        return "must name a host"
    if looks_like_ip_literal(host):
        # Only the dotted quad (no colon can be left here, so no IPv6): "127.1" or "0x7f.1" mean
        # different things to different resolvers.
        return None if _is_ip(host) else "an IPv4 host must be four decimal parts"
    if len(host) > 253:
        return "host must be at most 253 characters"
    return _labels_problem(host)


def _labels_problem(host: str) -> str | None:
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
    cluster: bool = False  # redis+cluster:// or rediss+cluster://: a seed node of a cluster

    def redacted(self) -> str:
        """Return the URL without its userinfo, for operator-facing output."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port is None else f":{self.port}"
        db = "" if self.db is None else f"/{self.db}"
        scheme = ("rediss" if self.tls else "redis") + ("+cluster" if self.cluster else "")
        return f"{scheme}://{host}{port}{db}"


def parse_redis_url(text: str) -> tuple[RedisTarget | None, str]:
    """Validate a redis:// (loopback only) or rediss:// URL, either with `+cluster` for a Redis
    Cluster's seed node; return it, or None and the rule."""
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in text):
        return None, "must be printable ASCII without spaces"
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    cluster = scheme.endswith("+cluster")
    scheme = scheme.removesuffix("+cluster")
    if not sep or scheme not in ("redis", "rediss"):
        return None, (
            "must be a redis:// or rediss:// URL (redis+cluster:// or rediss+cluster:// for a "
            "Redis Cluster), or the value off"
        )
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
        if cluster and db != 0:
            return None, "a Redis Cluster has only database 0"
    if not _is_ip(host) and dns_host_problem(host) is not None:
        return None, "host must be a DNS host name or an IP address"
    tls = scheme == "rediss"
    if not tls and not _is_loopback(host):
        return None, "redis:// is only allowed for loopback hosts; use rediss:// elsewhere"
    has_credentials = bool(at) and userinfo not in ("", ":")
    target = RedisTarget(
        tls=tls, host=host, port=port, db=db, has_credentials=has_credentials, cluster=cluster
    )
    return target, ""


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
