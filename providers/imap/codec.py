"""IMAP wire codec, pure: argument encoding (mUTF-7, quoting, literals, UID sets) and parsers.

aioimaplib neither quotes nor encodes arguments and leaves response codes unparsed
, so every argument goes out through the helpers here and every
response we rely on is read back through the parsers here.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable
from typing import NewType

from schemas import rules
from schemas.errors import InvalidArguments, SafetyLimit, ServiceUnavailable

# A fragment of a command line that is already encoded and safe to send. Only the helpers of
# this module make one, so a raw mailbox name or search text cannot reach the wire unencoded.
Arg = NewType("Arg", str)

UID_MAX = 4_294_967_295
MAX_CLEAN_BYTES = 256
FETCH_BATCH = 500  # aioimaplib recursion and O(n²) FETCH parsing

_FORBIDDEN = re.compile(r"[\x00\r\n]")
_ATOM = re.compile(r"[!#$&'+,\-./0-9:;<=>?@A-Z\[^_`a-z|}~\\]+")
_RAW_SAFE = re.compile(r"[\x20-\x7e]*")


# --- folder names -----------------------------------------------------------------------------


def folder_name_problem(name: str) -> str | None:
    """Say why a folder name breaks the rule (1-1024 UTF-8 bytes, no Cc/Cf), or None."""
    try:
        rules.check_folder_name(name, "folder name")
    except ValueError as exc:
        return str(exc)
    return None


def validate_folder_name(name: str) -> str:
    """Return name unchanged when it is a valid folder name, else raise InvalidArguments."""
    problem = folder_name_problem(name)
    if problem is not None:
        raise InvalidArguments(problem)
    return name


# --- modified UTF-7 (RFC 3501 §5.1.3) --------------------------------------------------------


def _b64_run(chars: list[str]) -> str:
    raw = "".join(chars).encode("utf-16-be")
    return "&" + base64.b64encode(raw).decode("ascii").rstrip("=").replace("/", ",") + "-"


def encode_mutf7(name: str) -> str:
    """Encode a mailbox name in modified UTF-7; raise InvalidArguments on lone surrogates."""
    out: list[str] = []
    run: list[str] = []
    try:
        for ch in name:
            if "\x20" <= ch <= "\x7e":
                if run:
                    out.append(_b64_run(run))
                    run = []
                out.append("&-" if ch == "&" else ch)
            else:
                run.append(ch)
        if run:
            out.append(_b64_run(run))
    except UnicodeEncodeError:
        raise InvalidArguments("folder name must be valid UTF-8") from None
    return "".join(out)


def decode_mutf7(wire: str) -> str:
    """Decode a modified UTF-7 mailbox name; raise ValueError unless it is canonical."""
    out: list[str] = []
    i = 0
    while i < len(wire):
        ch = wire[i]
        if ch == "&":
            end = wire.find("-", i + 1)
            if end < 0:
                raise ValueError("unterminated modified UTF-7 run")
            chunk = wire[i + 1 : end]
            if not chunk:
                out.append("&")
            else:
                padded = chunk.replace(",", "/") + "=" * (-len(chunk) % 4)
                try:
                    raw = base64.b64decode(padded, validate=True)
                    out.append(raw.decode("utf-16-be"))
                except (binascii.Error, UnicodeDecodeError):
                    raise ValueError("invalid modified UTF-7 run") from None
            i = end + 1
        elif "\x20" <= ch <= "\x7e":
            out.append(ch)
            i += 1
        else:
            raise ValueError("raw non-ASCII in modified UTF-7 name")
    name = "".join(out)
    # Only the canonical form round-trips: a name we would re-encode differently would make
    # us address a different mailbox than the one the server listed.
    if encode_mutf7(name) != wire:
        raise ValueError("non-canonical modified UTF-7 name")
    return name


# --- arguments --------------------------------------------------------------------------------


def _reject_line_breaks(value: str) -> None:
    if _FORBIDDEN.search(value):
        raise InvalidArguments("IMAP arguments must not contain CR, LF or NUL")


def quote(value: str) -> Arg:
    """Render value as an IMAP quoted string (backslash and double quote escaped)."""
    _reject_line_breaks(value)
    return Arg('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')


def needs_literal(value: str) -> bool:
    """Tell whether value has 8-bit characters, which a strict IMAP4rev1 quoted string lacks."""
    return not value.isascii()


def string_arg(value: str, *, non_sync_literal_max: int = 0) -> Arg:
    """Render a string argument: quoted when 7-bit, else a non-synchronizing literal if allowed.

    `non_sync_literal_max` is what the server accepts without a continuation (LITERAL+:
    unlimited, LITERAL-: 4096, neither: 0). Without one we fall back to a UTF-8 quoted string,
    which IMAP4rev2 and Dovecot accept; aioimaplib cannot send synchronizing literals.
    """
    _reject_line_breaks(value)
    if not needs_literal(value):
        return quote(value)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArguments("IMAP arguments must be valid UTF-8") from None
    if size <= non_sync_literal_max:
        return Arg(f"{{{size}+}}\r\n{value}")
    return quote(value)


def atom(value: str) -> Arg:
    """Pass an IMAP atom (a keyword such as RETURN or a flag such as \\Seen) after checking it."""
    if not _ATOM.fullmatch(value):
        raise InvalidArguments("not an IMAP atom")
    return Arg(value)


def raw(syntax: str) -> Arg:
    """Pass fixed protocol syntax built by our code, e.g. "(SPECIAL-USE)", after a safety check."""
    if not _RAW_SAFE.fullmatch(syntax):
        raise InvalidArguments("IMAP syntax must be printable ASCII")
    return Arg(syntax)


def mailbox_arg(name: str) -> Arg:
    """Validate, mUTF-7-encode and quote a mailbox name: the only way a name reaches the wire."""
    return quote(encode_mutf7(validate_folder_name(name)))


def number(value: int) -> Arg:
    """Render a non-negative integer argument."""
    if value < 0:
        raise InvalidArguments("IMAP numbers are non-negative")
    return Arg(str(value))


def _check_uid(uid: int) -> int:
    if not 1 <= uid <= UID_MAX:
        raise InvalidArguments("UIDs are 1-4294967295")
    return uid


def uid_set(uids: Iterable[int]) -> Arg:
    """Render UIDs as a compact sequence set ("1:3,7"); the set must not be empty."""
    ordered = sorted({_check_uid(u) for u in uids})
    if not ordered:
        raise InvalidArguments("empty UID set")
    parts: list[str] = []
    start = prev = ordered[0]
    for uid in ordered[1:]:
        if uid != prev + 1:
            parts.append(str(start) if start == prev else f"{start}:{prev}")
            start = uid
        prev = uid
    parts.append(str(start) if start == prev else f"{start}:{prev}")
    return Arg(",".join(parts))


def uid_batches(uids: Iterable[int], size: int = FETCH_BATCH) -> list[list[int]]:
    """Split UIDs (sorted, deduplicated) into batches of at most `size`."""
    ordered = sorted({_check_uid(u) for u in uids})
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def parse_uid_set(text: str, *, limit: int = 10_000) -> list[int]:
    """Expand a server's UID set ("4:6,9") in server order; more than `limit` UIDs → SafetyLimit."""
    out: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.partition(":")
            lo, hi = int(first), int(last or first)
            if lo > hi:  # "4:2" means 2:4 (RFC 4315 uid-range)
                lo, hi = hi, lo
            if not (first.isdigit() and (last or first).isdigit() and 1 <= lo <= hi <= UID_MAX):
                raise ValueError(part)
            if len(out) + hi - lo + 1 > limit:
                raise SafetyLimit()
            out.extend(range(lo, hi + 1))
    except ValueError:
        raise ServiceUnavailable("malformed UID set in IMAP response") from None
    return out


def clean_text(value: str, limit: int = MAX_CLEAN_BYTES) -> str:
    """Drop control/format characters and cut to at most `limit` UTF-8 bytes on a char boundary."""
    kept = "".join(ch for ch in value if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    data = kept.encode("utf-8")
    if len(data) <= limit:
        return kept
    return data[:limit].decode("utf-8", "ignore")
