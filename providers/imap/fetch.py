"""UID FETCH responses as per-message attribute maps, and the bounded raw-message fetch of reads."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Final

from providers.imap import codec, responses
from providers.imap.codec import Arg
from providers.imap.responses import Atom, ImapResponse, SelectResult, Token
from providers.imap.session import ImapSession
from providers.mailbox import RAW_PREFIX, RawMessage
from schemas.errors import NotFound, SafetyLimit, ServiceUnavailable, StaleReference
from schemas.mailbox import Reference
from schemas.search import bound_flags

MAX_FLAG_BYTES = 256
# RFC 3501 date-time; parsed by hand: strptime is slow and its %b follows the process locale.
_INTERNALDATE: Final = re.compile(
    rb" ?(\d{1,2})-([A-Za-z]{3})-(\d{4}) (\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})"
)
_MONTHS: Final = {
    name: number
    for number, name in enumerate(
        (b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
         b"dec"),
        start=1,
    )
}  # fmt: skip
FetchAttrs = dict[str, Token]


def parse_fetch(response: ImapResponse) -> list[FetchAttrs]:
    """Turn the untagged FETCH responses into attribute maps keyed by upper-cased item name."""
    messages: list[FetchAttrs] = []
    for group in responses.group_responses(response.lines):
        tokens = responses.tokenize(group)
        if len(tokens) < 3 or not isinstance(tokens[1], Atom) or tokens[1].upper() != "FETCH":
            continue
        items = tokens[2]
        if not isinstance(items, list) or len(items) % 2:
            raise ServiceUnavailable("malformed IMAP FETCH response")
        attrs: FetchAttrs = {}
        for key, value in zip(items[::2], items[1::2], strict=True):
            if not isinstance(key, Atom):
                raise ServiceUnavailable("malformed IMAP FETCH response")
            attrs[key.upper()] = value
        messages.append(attrs)
    return messages


def number(attrs: FetchAttrs, key: str) -> int:
    """Read an integer item (UID, RFC822.SIZE); a missing or bad one is a server fault."""
    value = attrs.get(key)
    if not isinstance(value, Atom) or not value.isdigit():
        raise ServiceUnavailable(f"IMAP FETCH lacks a valid {key}")
    return int(value)


def modseq(attrs: FetchAttrs) -> int:
    """Read MODSEQ (a one-element list) or 0 when the server sent none."""
    value = attrs.get("MODSEQ")
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], Atom):
        return int(value[0]) if value[0].isdigit() else 0
    return 0


def flags(attrs: FetchAttrs) -> list[str]:
    """Read FLAGS cleaned (≤ 256 bytes each), bounded to 100 without losing a system flag."""
    value = attrs.get("FLAGS")
    if not isinstance(value, list):
        return []
    texts = (responses.as_text(f) for f in value if f is not None)
    cleaned = (codec.clean_text(text, MAX_FLAG_BYTES) for text in texts)
    return bound_flags([f for f in cleaned if f])


def internal_date(attrs: FetchAttrs) -> datetime | None:
    """Parse INTERNALDATE ("17-Jul-1996 02:44:25 -0700") or return None."""
    value = attrs.get("INTERNALDATE")
    if not isinstance(value, bytes):
        return None
    found = _INTERNALDATE.fullmatch(value)
    month = _MONTHS.get(found.group(2).lower()) if found else None
    if found is None or month is None:
        return None
    day, _, year, hour, minute, second, sign, off_h, off_m = found.groups()
    offset = timedelta(hours=int(off_h), minutes=int(off_m))
    try:
        zone = timezone(-offset if sign == b"-" else offset)
        return datetime(
            int(year), month, int(day), int(hour), int(minute), int(second), tzinfo=zone
        )
    except ValueError:  # 31-Feb, hour 25, an offset of a day or more
        return None


def body_section(attrs: FetchAttrs, prefix: str) -> bytes | None:
    """Return the first BODY[...] item whose name starts with prefix (e.g. "BODY[]")."""
    for key, value in attrs.items():
        if key.startswith(prefix):
            return value if isinstance(value, bytes) else b""
    return None


def check_selection(selected: SelectResult, ref: Reference, *, fresh: bool) -> None:
    """Require the reference's UIDVALIDITY and, on a fresh selection, a plausible UID."""
    if selected.uid_validity != ref.uid_validity:
        raise StaleReference()
    # UIDNEXT of a selection reused from an earlier read may be behind new arrivals.
    if fresh and selected.uid_next and ref.uid >= selected.uid_next:
        raise NotFound()


def read_items(session: ImapSession) -> Arg:
    """Return the FETCH items of a read: metadata and the first 5 MiB + 1 byte, never \\Seen."""
    items = "UID FLAGS INTERNALDATE RFC822.SIZE"
    if "CONDSTORE" in session.capabilities:
        items += " MODSEQ"
    return codec.raw(f"({items} BODY.PEEK[]<0.{RAW_PREFIX + 1}>)")


async def fetch_raw(
    session: ImapSession, ref: Reference, *, reuse_selection: bool = False
) -> RawMessage:
    """Read one message with BODY.PEEK (never sets \\Seen), bounded to 5 MiB + 1 byte.

    Within one lease the folder selected by an earlier read stays selected, so a batch may
    reuse it; otherwise the EXAMINE goes out with the FETCH behind it (one round trip), and
    the answer is used only once the selection checked out.
    """
    selected = session.selected if session.selected_name == ref.folder else None
    if selected is not None and reuse_selection:
        check_selection(selected, ref, fresh=False)
        response = await session.uid_fetch([ref.uid], read_items(session))
    else:
        selected, response = await session.examine_and_fetch(
            ref.folder, [ref.uid], read_items(session)
        )
        check_selection(selected, ref, fresh=True)
    matches = [a for a in parse_fetch(response) if a.get("UID") == Atom(str(ref.uid))]
    if not matches:
        raise NotFound()
    if len(matches) > 1:
        raise SafetyLimit("the server answered one FETCH with several messages")
    return raw_message(ref, matches[0])


def raw_message(ref: Reference, attrs: FetchAttrs) -> RawMessage:
    """Build the read of `ref` from its FETCH attributes."""
    raw = body_section(attrs, "BODY[]")
    if raw is None:
        raise ServiceUnavailable("IMAP FETCH lacks the message body")
    return RawMessage(
        reference=ref,
        flags=flags(attrs),
        internal_date=internal_date(attrs),
        size_bytes=number(attrs, "RFC822.SIZE"),
        modseq=modseq(attrs),
        raw=raw,
    )
