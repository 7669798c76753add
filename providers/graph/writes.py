"""Graph's mailbox writes: the two flags, copy, move, trash, folders and MIME drafts.

Each write is one request made once (a 429 aside, which Graph answers before acting). A 4xx
proves it was not applied; a 5xx or a lost answer leaves it `unknown`, with the outcome saying
what may have happened, so the caller reads before trying again.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from providers.graph.account import GraphSettings
from providers.graph.answers import applied_or_not, read_failure
from providers.graph.folders import GRAPH_ID, folder_path
from providers.graph.http import ME, Answer, ExchangeLost, GraphHttp, Kind
from providers.graph.messages import current
from providers.graph.summaries import flags_of, reference_of
from providers.graph.wire import MailFolder, Message, decode
from providers.mailbox import Appended
from schemas import errors
from schemas.mailbox import Reference
from schemas.mutations import (
    FLAGS_UNKNOWN_WARNING,
    UNCONDITIONAL_WARNING,
    FlagResult,
    MutationResult,
    MutationStatus,
    not_applied,
    outcome_on_error,
    unknown,
)

GRAPH_FLAGS: Final = {"\\seen": "\\Seen", "\\flagged": "\\Flagged"}
NO_MODSEQ: Final = "Microsoft Graph has no MODSEQ: unchanged_since is not supported"


async def _write(
    http: GraphHttp, method: str, url: str, *, json: object = None, mime: bytes | None = None
) -> Answer:
    """Make one write; a lost answer is `OutcomeUnknown` unless nothing left."""
    body = None if json is None else msgspec.json.encode(json)
    encoded = None if mime is None else base64.b64encode(mime)
    try:
        return await http.request(Kind.WRITE, method, url, json=body, mime=encoded)
    except ExchangeLost as lost:
        connected = lost.connected
    if not connected:
        raise errors.ServiceUnavailable("Microsoft Graph could not be reached; nothing changed")
    raise errors.OutcomeUnknown("Microsoft Graph's answer was lost; the change may have applied")


def destination_id(destination: str) -> str:
    """A destination folder: native ID or well-known name, refused before any request."""
    if GRAPH_ID.fullmatch(destination) is None:
        raise errors.InvalidArguments(
            "a Microsoft Graph destination is a folder ID (from folders) or a well-known name"
        )
    return "inbox" if destination.upper() == "INBOX" else destination


def graph_flags(flags: Sequence[str], unchanged_since: int) -> set[str]:
    """The flags a change names, refused unless all are \\Seen or \\Flagged (no MODSEQ)."""
    if unchanged_since:
        raise errors.UnsupportedOperation(NO_MODSEQ)
    wanted = {GRAPH_FLAGS.get(flag.lower()) for flag in flags}
    if None in wanted or not wanted:
        raise errors.UnsupportedOperation("Microsoft Graph supports only \\Seen and \\Flagged")
    return {flag for flag in wanted if flag is not None}


async def change_flags(
    http: GraphHttp,
    settings: GraphSettings,
    reference: Reference,
    operation: Literal["add", "remove"],
    flags: Sequence[str],
    unchanged_since: int,
) -> FlagResult:
    """Set or clear \\Seen (isRead) and \\Flagged (the follow-up flag) in one PATCH."""
    wanted = graph_flags(flags, unchanged_since)
    await current(http, reference)
    patch: dict[str, object] = {}
    if "\\Seen" in wanted:
        patch["isRead"] = operation == "add"
    if "\\Flagged" in wanted:
        patch["flag"] = {"flagStatus": "flagged" if operation == "add" else "notFlagged"}
    unknown_flags = FlagResult(
        reference=reference, flags=[], conditional=False, warnings=[FLAGS_UNKNOWN_WARNING]
    )
    with outcome_on_error(unknown_flags):
        answer = await _write(http, "PATCH", f"{ME}/messages/{reference.id}", json=patch)
        applied = applied_or_not(answer, 200)
    if not applied:
        raise read_failure(answer)  # Graph refused it: nothing changed
    message = decode(answer.body, Message)
    return FlagResult(
        reference=reference,
        flags=flags_of(message),
        conditional=False,
        warnings=[UNCONDITIONAL_WARNING],
    )


async def relocate(
    http: GraphHttp,
    settings: GraphSettings,
    reference: Reference,
    destination: str,
    action: Literal["copy", "move"],
    status: MutationStatus,
) -> MutationResult:
    """Copy or move one message; the result names the message Graph says it made or moved."""
    target = destination_id(destination)
    await current(http, reference)
    url = f"{ME}/messages/{reference.id}/{action}"
    with outcome_on_error(unknown(reference)):
        answer = await _write(http, "POST", url, json={"destinationId": target})
        if not applied_or_not(answer, 201):
            failure = read_failure(answer)
            failure.outcome = not_applied(reference)
            raise failure
    moved = decode(answer.body, Message)
    return MutationResult(
        source=reference, destination=reference_of(moved, settings.account_id), status=status
    )


async def create_folder(http: GraphHttp, name: str) -> None:
    """Create one top-level folder with this display name."""
    answer = await _write(http, "POST", f"{ME}/mailFolders", json={"displayName": name})
    if answer.status == 409:
        raise errors.ServiceUnavailable("a folder with this name already exists; nothing changed")
    if not applied_or_not(answer, 201):
        raise read_failure(answer)
    decode(answer.body, MailFolder)


async def rename_folder(http: GraphHttp, old: str, new: str) -> None:
    """Give folder `old` (a native ID) the display name `new`."""
    answer = await _write(http, "PATCH", folder_path(old), json={"displayName": new})
    if answer.status == 409:
        raise errors.ServiceUnavailable("a folder with this name already exists; nothing changed")
    if not applied_or_not(answer, 200):
        raise read_failure(answer)
    decode(answer.body, MailFolder)


async def append_draft(
    http: GraphHttp, settings: GraphSettings, raw: bytes, folder: str | None
) -> Appended:
    """Upload a MIME draft to `folder` (default Drafts); Graph answers with the draft it made."""
    target = destination_id(folder) if folder else "drafts"
    url = f"{folder_path(target)}/messages"
    with outcome_on_error(MutationResult(status="unknown")):
        answer = await _write(http, "POST", url, mime=raw)
        if not applied_or_not(answer, 201):
            failure = read_failure(answer)
            failure.outcome = MutationResult(status="not_applied")
            raise failure
    draft = decode(answer.body, Message)
    if not draft.is_draft:
        raise errors.OutcomeUnknown("Microsoft Graph stored the upload, but not as a draft")
    where = reference_of(draft, settings.account_id)
    return Appended(folder=where.folder, reference=where)
