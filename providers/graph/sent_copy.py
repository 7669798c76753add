"""Evidence for an unknown Graph send: the message Microsoft filed in Sent Items, if any.

Exchange files every message sendMail accepted in Sent Items, with the MIME's Message-ID as
`internetMessageId`; a copy carrying the preparation's exact Message-ID is positive evidence
that Microsoft took it. Exchange rewrites MIME when it files, so the copy's bytes seldom hash
to what was sent: found by Message-ID, it counts with `identical` false. Read-only.
"""

from __future__ import annotations

import hashlib
from typing import Final

from providers.graph.answers import get, read_body
from providers.graph.http import ME, GraphHttp
from providers.graph.search import odata_string
from providers.graph.summaries import reference_of
from providers.graph.wire import MessagePage, decode
from providers.mailbox import RAW_PREFIX, SentCopy

MAX_COPIES: Final = 10


async def find_sent_copies(http: GraphHttp, account: str, message_id: str) -> list[SentCopy]:
    """The Sent Items messages whose internetMessageId is exactly `message_id` (with <>)."""
    wanted = message_id if message_id.startswith("<") else f"<{message_id}>"
    params = {
        "$top": str(MAX_COPIES),
        "$select": "id,parentFolderId,internetMessageId",
        "$filter": f"internetMessageId eq {odata_string(wanted)}",
    }
    answer = await get(http, f"{ME}/mailFolders/sentitems/messages", params)
    page = decode(read_body(answer), MessagePage)
    copies: list[SentCopy] = []
    for message in page.value:
        if message.internet_message_id != wanted:
            continue  # Graph's filter is the index's; the exact match is ours
        where = reference_of(message, account)
        body = await get(http, f"{ME}/messages/{message.id}/$value", limit=RAW_PREFIX + 1)
        raw = read_body(body) if not body.cut else body.body
        copies.append(
            SentCopy(
                folder=where.folder,
                uid_validity=0,
                uid=0,
                size=body.declared_length or len(raw),
                sha256=None if body.cut else hashlib.sha256(raw).hexdigest(),
                graph_id=message.id,
            )
        )
    return copies
