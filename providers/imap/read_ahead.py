"""read_many over IMAP in two round trips per folder instead of one per message.

A batch names its references up front. For three or more in one folder, the sizes go out
behind the EXAMINE (one round trip), then as many whole messages as fit `AHEAD_BYTES` come in
one UID FETCH. Each result is exactly what a single read of that reference returns; whatever
a read ahead could not settle (an expunged UID, a duplicate answer, the rest past the byte
cap) is read on its own when its turn comes, with that read's own errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from providers.imap import codec
from providers.imap.fetch import (
    FetchAttrs,
    check_selection,
    fetch_raw,
    number,
    parse_fetch,
    raw_message,
    read_items,
)
from providers.imap.responses import Atom
from providers.imap.session import ImapSession
from providers.mailbox import RAW_PREFIX, RawMessage
from schemas.mailbox import Reference

# At most this much of a lease's 12 MiB read budget is read ahead at once: a batch that stops
# at its JSON budget may leave it unused.
AHEAD_BYTES = 4 * 1024 * 1024
# Two messages take two round trips either way; from three on, reading ahead saves some.
AHEAD_MIN = 3

Key = tuple[str, int, int]


def key(ref: Reference) -> Key:
    """Identify a reference (References are not hashable)."""
    return ref.folder, ref.uid_validity, ref.uid


class ImapReader:
    """Reads of one read_many batch on one leased session, in the batch's order."""

    def __init__(self, session: ImapSession, planned: Sequence[Reference] = ()) -> None:
        self._session = session
        self._planned = list(planned)
        self._next = 0
        self._ahead: dict[Key, RawMessage] = {}

    async def read_raw(self, reference: Reference) -> RawMessage:
        """Read one message without setting \\Seen, from what was read ahead when it can."""
        found = self._ahead.pop(key(reference), None)
        if found is not None:
            return found
        group = self._group_from(reference)
        if len(group) >= AHEAD_MIN:
            read = await read_ahead(self._session, group)
            found = read.pop(reference.uid, None)
            self._ahead.update((key(m.reference), m) for m in read.values())
            if found is not None:
                return found
        return await fetch_raw(self._session, reference, reuse_selection=True)

    def _group_from(self, reference: Reference) -> list[Reference]:
        """Return `reference` and the later planned ones of its folder not yet read ahead."""
        wanted = key(reference)
        for index in range(self._next, len(self._planned)):
            if key(self._planned[index]) == wanted:
                self._next = index + 1
                break
        else:
            return []
        group, seen = [reference], {reference.uid}
        for ref in self._planned[self._next :]:
            same = (ref.folder, ref.uid_validity) == wanted[:2] and not ref.is_graph
            if same and ref.uid not in seen and key(ref) not in self._ahead:
                group.append(ref)
                seen.add(ref.uid)
        return group


async def read_ahead(session: ImapSession, group: list[Reference]) -> dict[int, RawMessage]:
    """Read the group's messages (one folder) whole, as many as fit AHEAD_BYTES, by UID.

    The first reference is checked as a single read checks it (StaleReference, NotFound).
    """
    first = group[0]
    uids = [ref.uid for ref in group]
    sizes_of = codec.raw("(UID RFC822.SIZE)")
    selected, answer = await session.examine_and_fetch(first.folder, uids, sizes_of)
    check_selection(selected, first, fresh=True)
    sizes = {number(attrs, "UID"): number(attrs, "RFC822.SIZE") for attrs in parse_fetch(answer)}
    taken: list[int] = []
    total = 0
    for uid in uids:
        if uid not in sizes:
            continue  # expunged: its own read will say so
        cost = min(sizes[uid], RAW_PREFIX + 1)
        if taken and total + cost > AHEAD_BYTES:
            break
        taken.append(uid)
        total += cost
    if len(taken) < 2:
        return {}  # nothing saved: the single reads take the same round trips
    response = await session.uid_fetch(taken, read_items(session))
    answers: dict[int, list[FetchAttrs]] = {}
    for attrs in parse_fetch(response):
        atom = attrs.get("UID")
        if isinstance(atom, Atom) and atom.isdigit():
            answers.setdefault(int(atom), []).append(attrs)
    read: dict[int, RawMessage] = {}
    for ref in group:
        matches = answers.get(ref.uid, [])
        if len(matches) == 1:  # none or several: the single read reports it
            read[ref.uid] = raw_message(ref, matches[0])
    return read
