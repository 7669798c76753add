"""APPEND of saved drafts and revisions: flag \\Draft, exact folder or the unique \\Drafts one."""

from __future__ import annotations

from providers.imap import responses
from providers.imap.append import MAX_APPEND_BYTES, unique_role_folder
from providers.imap.session import ImapSession
from providers.mailbox import Appended
from schemas.errors import InvalidArguments, SafetyLimit
from schemas.mutations import MutationResult, outcome_on_error

DRAFT_FLAGS = ("\\Draft",)


def append_limit(capabilities: frozenset[str]) -> int | None:
    """The server-wide APPENDLIMIT=n (RFC 7889), or None when none is advertised."""
    for atom in capabilities:
        name, _, value = atom.partition("=")
        if name == "APPENDLIMIT" and value.isdigit():
            return int(value)
    return None


async def append_draft(session: ImapSession, raw: bytes, folder: str | None) -> Appended:
    """APPEND a draft with \\Draft; never replaces or deletes anything.

    Everything that can refuse the draft (size, APPENDLIMIT, no unique Drafts folder) is
    checked before the APPEND command is sent. Once it is sent, any error carries the outcome
    `MutationResult(status="unknown")`: the caller searches the folder before saving again.
    """
    if not raw or len(raw) > MAX_APPEND_BYTES:
        raise InvalidArguments("a draft must be a non-empty message of at most 5 MiB")
    limit = append_limit(session.capabilities)
    if limit is not None and len(raw) > limit:
        raise SafetyLimit("the draft exceeds the server's APPENDLIMIT")
    target = folder or await unique_role_folder(session, "drafts")
    with outcome_on_error(MutationResult(status="unknown")):
        response = await session.append(target, raw, flags=DRAFT_FLAGS)
        mapping = responses.parse_appenduid(response)
    if mapping is None or len(mapping.uids) != 1:
        return Appended(target)
    return Appended(target, mapping.uid_validity, mapping.uids[0])
