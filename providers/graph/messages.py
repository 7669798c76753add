"""Reading one Graph message: its metadata checked against the reference, then its MIME."""

from __future__ import annotations

from typing import Final

from providers.graph.account import PROVIDER, GraphSettings
from providers.graph.answers import get, read_body
from providers.graph.http import ME, GraphHttp
from providers.graph.summaries import flags_of, moment
from providers.graph.wire import Message, decode
from providers.mailbox import RAW_PREFIX, RawMessage
from schemas import errors
from schemas.mailbox import Reference

META_FIELDS: Final = "id,parentFolderId,internetMessageId,isRead,isDraft,flag,receivedDateTime"
STALE: Final = "the message is no longer where the reference says; search again"


def graph_reference(reference: Reference, settings: GraphSettings) -> Reference:
    """Accept only a whole Graph reference for the configured account (before any request)."""
    if reference.provider != PROVIDER:
        raise errors.InvalidArguments(
            "this mailbox is Microsoft Graph: pass a reference it returned, whole"
        )
    if reference.account != settings.account_id:
        raise errors.InvalidArguments("the reference belongs to another Microsoft account")
    return reference


async def current(http: GraphHttp, reference: Reference) -> Message:
    """The message's metadata, refused as stale when it moved away from the reference's folder."""
    answer = await get(http, f"{ME}/messages/{reference.id}", {"$select": META_FIELDS})
    message = decode(read_body(answer), Message)
    if message.id != reference.id or message.parent_folder_id != reference.folder:
        raise errors.StaleReference(STALE)
    return message


async def read_raw(http: GraphHttp, reference: Reference) -> RawMessage:
    """The message's flags, arrival and first 5 MiB + 1 bytes of MIME; never marks it read."""
    message = await current(http, reference)
    answer = await get(http, f"{ME}/messages/{reference.id}/$value", limit=RAW_PREFIX + 1)
    if answer.status != 200:
        read_body(answer)  # raises what the failure means
    raw = answer.body
    size = max(answer.declared_length or 0, RAW_PREFIX + 1) if answer.cut else len(raw)
    return RawMessage(
        reference=reference,
        flags=flags_of(message),
        internal_date=moment(message.received_date_time),
        size_bytes=size,
        modseq=0,
        raw=raw,
    )
