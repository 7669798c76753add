"""Looking into the Gmail-shaped mailbox of the XOAUTH2 rig behind angelos' back (PLAIN login)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aioimaplib

from support.mailbox_names import quote_mailbox
from support.services import Services, XOAuth2Rig

SENT_MAIL = "[Gmail]/Sent Mail"


@contextlib.asynccontextmanager
async def rig_imap(services: Services, rig: XOAuth2Rig) -> AsyncIterator[aioimaplib.IMAP4_SSL]:
    """An independent IMAP client on the Gmail-shaped mailbox, logged in with the rig password."""
    imap = aioimaplib.IMAP4_SSL(
        host="localhost", port=rig.imap_port, timeout=10, ssl_context=services.ssl_context()
    )
    await imap.wait_hello_from_server()
    assert "OK" == (await imap.login(rig.user, rig.password)).result
    try:
        yield imap
    finally:
        with contextlib.suppress(TimeoutError, aioimaplib.Abort, OSError):
            await imap.logout()


async def copies_in(imap: aioimaplib.IMAP4_SSL, folder: str, message_id: str) -> list[bytes]:
    """The exact bytes of every message in `folder` with this Message-ID."""
    assert "OK" == (await imap.select(quote_mailbox(folder))).result
    found = await imap.uid_search(f'HEADER Message-ID "{message_id}"', charset=None)
    copies = []
    for uid in found.lines[0].split():
        fetched = await imap.uid("fetch", uid.decode(), "(BODY.PEEK[])")
        copies.append(bytes(fetched.lines[1]))
    return copies
