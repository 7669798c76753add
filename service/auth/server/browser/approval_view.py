"""The approval page and its refusals, rendered like the other owner pages (pages.render).

The envelope is the exact text hashed into the approval: the lines of approval.text, each
HTML-escaped, in one `<pre id="envelope">`, so what the browser displays (its textContent) is
those lines joined by line feeds.
"""

from __future__ import annotations

from html import escape
from typing import Final

from aiohttp import web

from .approval_state import Reason
from .pages import render

# Each refusal: its HTTP status, the page title and what it tells the owner.
REFUSAL_PAGES: Final[dict[Reason, tuple[int, str, str]]] = {
    "unknown": (
        404,
        "This send cannot be approved",
        "This send is unknown here, or it was not prepared for this mailbox.",
    ),
    "unreadable": (
        409,
        "This send cannot be approved",
        "The record of this send failed its integrity checks, so it cannot be approved. "
        "Nothing was changed.",
    ),
    "not_required": (
        409,
        "This send cannot be approved",
        "This send needs no approval: the application can send it without one.",
    ),
    "elicitation_only": (
        409,
        "This send cannot be approved",
        "This send must be approved in the application that prepared it; a passkey approval "
        "is not accepted for it.",
    ),
    "approved": (
        200,
        "Send approved",
        "This send is approved. The application can now send it; nothing more is needed here.",
    ),
    "declined": (
        200,
        "Send declined",
        "You declined this send. It will not be sent; it stays unsent until it expires.",
    ),
    "expired": (
        410,
        "This send has expired",
        "This send has expired and was not sent. The application must prepare it again.",
    ),
    "claimed": (
        409,
        "This send cannot be approved",
        "This send was already claimed for sending (it was sent, is being sent, or has ended). "
        "Nothing can be approved now.",
    ),
}


def approval_page(
    *, csrf: str, pid: str, lines: list[str], shown: str, mail_from: str
) -> web.Response:
    """The stored envelope of one preparation, Approve (a passkey assertion) and Decline."""
    envelope = "\n".join(escape(line) for line in lines)
    body = (
        f'<p class="mailbox">Mailbox <strong>{escape(mail_from)}</strong></p>'
        "<p>An application asks to send this message from your mailbox. Check who it goes to, "
        "then approve it with your passkey. Nothing is sent until you approve it and the "
        "application then confirms the send.</p>"
        f'<pre id="envelope">{envelope}</pre>'
        f'<form id="approve-send" data-action="approve" data-pid="{escape(pid)}" '
        f'data-shown="{escape(shown)}">'
        '<button id="approve" type="submit">Approve with passkey</button></form>'
        f'<form id="decline" method="post" action="/oauth/approve/{escape(pid)}/decline">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        '<button id="decline-button" type="submit" class="secondary">Decline</button></form>'
        '<p id="status" role="status"></p>'
    )
    return render("Approve this send?", body, csrf)


def refusal_page(reason: Reason, mail_from: str) -> web.Response:
    """Why this preparation cannot be approved now; nothing was changed."""
    status, title, text = REFUSAL_PAGES[reason]
    body = (
        f'<p class="mailbox">Mailbox <strong>{escape(mail_from)}</strong></p>'
        f'<p id="refusal" data-reason="{escape(reason)}">{escape(text)}</p>'
    )
    return render(title, body, status=status)
