"""Same-folder conversations by exact Message-ID links, and the strict link-header
reading that the exact Message-ID search filter shares.

Only the selected fields Message-ID, References and In-Reply-To are fetched (BODY.PEEK), at most
16 candidates per command. The server-side HEADER search only proposes candidates; every
candidate is verified here byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from providers.imap import codec, responses
from providers.imap.codec import Arg
from providers.imap.cursor import (
    CONVERSATION_FORMAT,
    CursorState,
    check_generation,
    check_scope,
    decode_cursor,
    plan_window,
    scope_digest,
)
from providers.imap.fetch import body_section, parse_fetch
from providers.imap.responses import ImapResponse
from providers.imap.session import ImapSession
from providers.imap.summaries import summary_page
from providers.mime.header_block import HeaderRefused, strict_fields
from providers.off_loop import off_loop
from schemas.errors import (
    InvalidArguments,
    NotFound,
    SafetyLimit,
    ServiceUnavailable,
    StaleReference,
    UnsupportedOperation,
)
from schemas.search import MESSAGE_ID_CORE, ConversationQuery, Order, SummaryPage

SECTION_LIMIT = 64 * 1024
VERIFY_BATCH = 16
MAX_SECTION_IDS = 100
MAX_ID_BYTES = 1024
PREFILTER_LIMIT = 64 * 1024
LINK_FIELDS = ("MESSAGE-ID", "REFERENCES", "IN-REPLY-TO")

LinkSection = dict[str, list[str]]  # upper-cased field name → bare IDs (local@domain)


# --- strict link-header parsing (pure) --------------------------------------------------------


def parse_link_section(
    section: bytes, names: tuple[str, ...], *, enforce_limits: bool = True
) -> LinkSection | None:
    """Parse a HEADER.FIELDS section of link fields; None when it is malformed.

    Malformed: bytes other than ASCII, bare CR or LF, a line that is neither a field nor a
    continuation, another field name, a field given twice, or a value that is not a list of
    modern `<local@domain>` IDs with optional comments. An incomplete section (no final empty
    line) is a server fault; over 64 KiB, over 100 IDs or an ID over 1024 bytes is a
    SafetyLimit when `enforce_limits`, else simply malformed.
    """
    if len(section) > SECTION_LIMIT:
        raise SafetyLimit("a selected header section exceeds 64 KiB")
    if section == b"\r\n":
        return {}
    if not section.endswith(b"\r\n\r\n"):
        raise ServiceUnavailable("the IMAP server returned an incomplete header section")
    if not section.isascii():
        return None
    try:
        fields, body_start = strict_fields(
            section, 0, len(section), frozenset(name.lower() for name in names)
        )
    except HeaderRefused:
        return None
    if body_start != len(section):  # a second empty line: a line that is no field
        return None
    raw = {name.upper(): value.decode("ascii") for name, value in fields.items()}
    found: LinkSection = {}
    total = 0
    for key, value in raw.items():
        ids = parse_id_list(value, enforce_limits=enforce_limits)
        if ids is None:
            return None
        total += len(ids)
        if total > MAX_SECTION_IDS:
            if enforce_limits:
                raise SafetyLimit("more than 100 message IDs in one header section")
            return None
        found[key] = ids
    return found


def parse_id_list(value: str, *, enforce_limits: bool = True) -> list[str] | None:
    """Read `<id> <id> ...` with optional comments and whitespace; None when anything else."""
    ids: list[str] = []
    i, n = 0, len(value)
    while i < n:
        ch = value[i]
        if ch in " \t":
            i += 1
        elif ch == "(":
            end = _comment_end(value, i)
            if end is None:
                return None
            i = end
        elif ch == "<":
            close = value.find(">", i + 1)
            if close < 0:
                return None
            core = value[i + 1 : close]
            if len(core) > MAX_ID_BYTES:
                if enforce_limits:
                    raise SafetyLimit("a message ID exceeds 1024 bytes")
                return None
            if not MESSAGE_ID_CORE.fullmatch(core):
                return None
            ids.append(core)
            i = close + 1
        else:
            return None
    return ids


def _comment_end(value: str, start: int) -> int | None:
    depth = 0
    i = start
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def seed_ids(section: LinkSection) -> list[str]:
    """Return the anchor's seed: every ID of its three link fields, sorted and distinct."""
    return sorted({i for ids in section.values() for i in ids})


def prefilter(seed: list[str]) -> list[Arg]:
    """Build the balanced OR tree of HEADER criteria over every seed ID and link field.

    The conservative size estimate of the whole answer must stay within 64 KiB.
    """
    estimate = 512
    terms: list[list[Arg]] = []
    for ident in seed:
        quoted = codec.quote(f"<{ident}>")
        for name in LINK_FIELDS:
            estimate += len(name) + len(ident) + (len(quoted) - len(ident)) + 32
            terms.append([codec.atom("HEADER"), codec.atom(name), quoted])
    if estimate > PREFILTER_LIMIT:
        raise SafetyLimit("the conversation's ID set is too large to search for")
    return _or_tree(terms)


def _or_tree(terms: list[list[Arg]]) -> list[Arg]:
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return [codec.atom("OR"), *_or_tree(terms[:middle]), *_or_tree(terms[middle:])]


# --- candidate verification (IMAP) ------------------------------------------------------------


async def fetch_link_sections(
    session: ImapSession, uids: list[int], names: tuple[str, ...], *, enforce_limits: bool
) -> dict[int, LinkSection | None]:
    """Fetch and parse the named link fields of `uids`; expunged UIDs are absent from the map.

    A candidate expunged concurrently simply has no FETCH response.
    """
    peek = f"BODY.PEEK[HEADER.FIELDS ({' '.join(names)})]<0.{SECTION_LIMIT + 1}>"
    response = await session.uid_fetch(uids, codec.raw(f"(UID {peek})"))
    return await off_loop(link_sections, response, uids, names, enforce_limits)


def link_sections(
    response: ImapResponse, uids: list[int], names: tuple[str, ...], enforce_limits: bool
) -> dict[int, LinkSection | None]:
    """Parse the link sections of the FETCH responses for `uids` (up to 16 x 64 KiB)."""
    wanted = set(uids)
    sections: dict[int, LinkSection | None] = {}
    for attrs in parse_fetch(response):
        uid = attrs.get("UID")
        if not (isinstance(uid, responses.Atom) and uid.isdigit() and int(uid) in wanted):
            continue
        section = body_section(attrs, "BODY[")
        if section is None:
            continue  # an unsolicited flag update; the real response carries the section
        sections[int(uid)] = parse_link_section(section, names, enforce_limits=enforce_limits)
    return sections


async def select_verified(
    session: ImapSession,
    candidates: list[int],
    limit: int,
    names: tuple[str, ...],
    accept: Callable[[LinkSection], bool],
    *,
    enforce_limits: bool = True,
) -> tuple[list[int], int | None]:
    """Verify candidates (already in page order) 16 at a time until `limit` rows are found.

    Return the accepted UIDs and, when the quota filled before the candidates ran out, the
    last accepted UID (the cut point the cursor resumes after).
    """
    accepted: list[int] = []
    for start in range(0, len(candidates), VERIFY_BATCH):
        batch = candidates[start : start + VERIFY_BATCH]
        sections = await fetch_link_sections(session, batch, names, enforce_limits=enforce_limits)
        for offset, uid in enumerate(batch):
            section = sections.get(uid)
            if section is None or not accept(section):
                continue
            accepted.append(uid)
            if len(accepted) == limit:
                more = start + offset + 1 < len(candidates)
                return accepted, uid if more else None
    return accepted, None


# --- the conversation lookup ------------------------------------------------------------------


def decode_conversation_cursor(query: ConversationQuery) -> CursorState | None:
    """Decode the cursor before any mailbox access (its scope is checked after the seed)."""
    if query.anchor.provider:
        raise UnsupportedOperation("conversation is not supported for Microsoft Graph")
    return decode_cursor(query.cursor, CONVERSATION_FORMAT) if query.cursor else None


def conversation_scope(query: ConversationQuery, seed: list[str]) -> str:
    """Digest what a conversation cursor binds: anchor, order and the seed ID set."""
    seed_digest = hashlib.sha256("\n".join(seed).encode("ascii")).hexdigest()
    anchor = query.anchor
    return scope_digest(
        "conversation-v1", anchor.folder, anchor.uid_validity, anchor.uid, query.order, seed_digest
    )


async def conversation_page(
    session: ImapSession, query: ConversationQuery, cursor: CursorState | None
) -> SummaryPage:
    """Find one window's messages linked to the anchor's fixed ID set, in UID order."""
    anchor = query.anchor
    selected = await session.examine(anchor.folder)
    if selected.uid_validity != anchor.uid_validity:
        raise StaleReference()
    if selected.exists == 0 or anchor.uid >= selected.uid_next:
        raise NotFound()
    sections = await fetch_link_sections(session, [anchor.uid], LINK_FIELDS, enforce_limits=True)
    if anchor.uid not in sections:
        raise NotFound()
    section = sections[anchor.uid]
    seed = seed_ids(section) if section is not None else []
    if not seed:
        raise InvalidArguments(
            "the anchor has no usable Message-ID, References or In-Reply-To identifiers"
        )
    scope = conversation_scope(query, seed)
    if cursor is not None:
        check_scope(cursor, scope)
        check_generation(cursor, selected.uid_validity, selected.uid_next)
    ceiling = cursor.upper if cursor else selected.uid_next - 1
    window = plan_window(query.order, ceiling, cursor)
    found = await session.uid_search(*window.criteria(), *prefilter(seed))
    candidates = _ordered(found, window.low, window.high, query.order)
    wanted = set(seed)
    returned, last = await select_verified(
        session,
        candidates,
        query.limit,
        LINK_FIELDS,
        lambda links: any(i in wanted for ids in links.values() for i in ids),
    )
    return await summary_page(
        session, anchor.folder, selected.uid_validity, query.order, window, ceiling,
        (returned, last), (CONVERSATION_FORMAT, scope),
    )  # fmt: skip


def _ordered(uids: list[int], low: int, high: int, order: Order) -> list[int]:
    inside = {u for u in uids if low <= u <= high}
    return sorted(inside, reverse=order == "newest")
