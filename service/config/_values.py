"""Pure value rules shared by the configuration loaders (no I/O, no exceptions)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

HEX64 = re.compile(r"[0-9a-fA-F]{64}")  # a 256-bit key or digest in hex
# A C2SP signed-note signer key: PRIVATE+KEY+<name>+<8 hex key ID>+<base64 of 33 bytes>.
SIGNER_KEY = re.compile(
    r"PRIVATE\+KEY\+[!-*,-~]{1,64}\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}", re.ASCII
)
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*", re.ASCII)
_HOST_FORBIDDEN = frozenset("/\\:@ \t\r\n\x00")
_ATEXT = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+", re.ASCII)
_DIGITS = re.compile(r"[0-9]{1,12}", re.ASCII)
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
_NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_DURATION_NS = 2**63 - 1
_MAX_DURATION_CHARS = 64


def value_of(env: Mapping[str, str], name: str) -> str | None:
    """Return the variable's value, treating an empty string like an unset variable."""
    raw = env.get(name)
    if not isinstance(raw, str) or raw == "":
        return None
    return raw


def has_control(text: str) -> bool:
    """Tell whether text holds a C0, DEL or C1 control character."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in text)


def has_cr_lf_nul(text: str) -> bool:
    """Tell whether text holds CR, LF or NUL, the characters that break protocol lines."""
    return "\r" in text or "\n" in text or "\x00" in text


def utf8_size(text: str) -> int:
    """Count the UTF-8 bytes of text, tolerating lone surrogates from the environment."""
    return len(text.encode("utf-8", "surrogatepass"))


def looks_like_ip_literal(host: str) -> bool:
    """Tell whether a host is an IP literal, including the short IPv4 forms resolvers accept."""
    candidate = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        pass
    else:
        return True
    # "127.1", "2130706433" and "0x7f.1" are IPv4 to inet_aton; no real top-level domain is numeric.
    last_label = candidate.rsplit(".", 1)[-1]
    return _NUMERIC_LABEL.fullmatch(last_label) is not None


def dns_host_problem(host: str) -> str | None:
    """Explain why host is not an acceptable DNS host name, or return None."""
    if looks_like_ip_literal(host):
        return "must be a DNS host name, not an IP literal"
    if len(host) > 253:
        return "must be at most 253 characters"
    if any(ch in _HOST_FORBIDDEN for ch in host):
        return "must be a bare DNS host name (no scheme, port, path, userinfo or whitespace)"
    if not all(_LABEL.fullmatch(label) for label in host.split(".")):
        return "must be dot-separated labels of 1-63 letters, digits or inner hyphens"
    return None


def is_bare_address(text: str) -> bool:
    """Tell whether text is a bare addr-spec (local@domain, dot-atoms, printable ASCII, 1-254)."""
    if not 1 <= len(text) <= 254 or any(not 33 <= ord(ch) <= 126 for ch in text):
        return False
    local, at, domain = text.rpartition("@")
    if not at:
        return False
    return _is_dot_atom(local) and _is_dot_atom(domain)


def _is_dot_atom(text: str) -> bool:
    return all(_ATEXT.fullmatch(part) for part in text.split("."))


def parse_decimal(text: str) -> int | None:
    """Parse a plain non-negative ASCII decimal of at most 12 digits, else return None."""
    if _DIGITS.fullmatch(text) is None:
        return None
    return int(text)


def parse_port(text: str) -> int | None:
    """Parse a TCP port 1..65535 written as plain ASCII digits, else return None."""
    number = parse_decimal(text)
    if number is None or not 1 <= number <= 65535:
        return None
    return number


def parse_go_duration(text: str) -> int | None:
    """Parse a Go duration string ("30s", "1m30s", "1.5h", "0") into nanoseconds, else None."""
    if not text or len(text) > _MAX_DURATION_CHARS:
        return None
    sign = 1
    rest = text
    if rest[0] in "+-":
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        return None
    total = 0
    position = 0
    while position < len(rest):
        match = _DURATION_PART.match(rest, position)
        if match is None:
            return None
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        if not whole and not fraction:
            return None
        scale = _NS_PER_UNIT[unit]
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        if total > _MAX_DURATION_NS:
            return None
        position = match.end()
    return sign * total
