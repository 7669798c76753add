"""The server-rendered pages: sign-in/enrolment, consent, grants and errors.

Every value is HTML-escaped; the pages carry no inline script or style, only the same-origin
app.js and app.css, and their own security headers (a wider CSP than the OAuth default).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from html import escape
from typing import Final, Literal
from urllib.parse import urlsplit

from aiohttp import web

from schemas.scopes import BASE_SCOPE, Scope
from service.auth.server.store import GrantEntry

PAGE_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
PERMISSIONS: Final = "publickey-credentials-get=(self), publickey-credentials-create=(self)"
SCOPE_TEXT: Final[dict[Scope, str]] = {
    "mail.read": "Read and search your mail",
    "mail.write": "Organise mail: flags, folders, drafts",
    "mail.send": "Send mail as you",
}

# What each check of an unredirectable authorization request means, for the owner.
REFUSAL_TEXT: Final[dict[str, str]] = {
    "query_too_long": "The request is longer than this server accepts.",
    "query_not_utf8": "The request's parameters are not valid UTF-8 text.",
    "repeated_parameter": "A parameter appears more than once in the request.",
    "client_id_missing": "The request does not say which application it comes from (no client_id).",
    "unknown_client": "The application's client ID is not one this server is configured for.",
    "redirect_uri_missing": "The request has no callback address (no redirect_uri).",
    "redirect_uri_not_registered": (
        "The callback address in the request is not one registered for this application."
    ),
    "client_metadata_disabled": (
        "The application names itself by a metadata document URL, and this server is not set"
        " to accept those (ANGELOS_OAUTH_CLIENT_METADATA_ENABLED)."
    ),
    "client_metadata_url": "The application's metadata document URL is not an acceptable one.",
    "client_metadata_unavailable": (
        "The application's metadata document could not be fetched. Try again shortly."
    ),
    "client_metadata_budget": "Too many metadata documents were fetched. Wait a minute.",
    "registration_unknown": (
        "The application registered itself with this server, and that registration is unknown"
        " or expired (unanswered registrations last 10 minutes). Connect it again."
    ),
    "registration_unavailable": "The application's registration cannot be read now. Try again.",
}
SELF_REGISTERED: Final = "self-registered — its name is what it says about itself"
METADATA_REFUSED: Final = "The application's metadata document breaks a rule, so it is not trusted."

LoginMode = Literal["enrol", "sign-in"]


def page_headers(form_target: str | None = None) -> dict[str, str]:
    """The headers of a rendered page; `form_target` is an extra origin forms may post to."""
    csp = PAGE_CSP
    if form_target is not None:
        csp = csp.replace("form-action 'self'", f"form-action 'self' {form_target}")
    return {
        "Content-Security-Policy": csp,
        "Permissions-Policy": PERMISSIONS,
        "Referrer-Policy": "same-origin",
    }


def render(
    title: str, body: str, csrf: str = "", *, status: int = 200, form_target: str | None = None
) -> web.Response:
    """A complete page around `body` (already escaped), with the page headers."""
    meta = f'<meta name="angelos-csrf" content="{escape(csrf)}">' if csrf else ""
    html = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>{meta}"
        '<link rel="stylesheet" href="/oauth/assets/app.css">'
        '<script src="/oauth/assets/app.js" defer></script></head>'
        f"<body><main><h1>{escape(title)}</h1>{body}</main></body></html>\n"
    )
    return web.Response(
        text=html,
        status=status,
        content_type="text/html",
        charset="utf-8",
        headers=page_headers(form_target),
    )


def login_page(
    mode: LoginMode, csrf: str, mail_from: str, next_path: str | None = None
) -> web.Response:
    """The sign-in page, or the first-passkey enrolment page before an owner exists; signed
    in, the page goes on to `next_path` (a path of this server) when given."""
    mailbox = f'<p class="mailbox">Mailbox <strong>{escape(mail_from)}</strong></p>'
    if mode == "enrol":
        body = (
            f"{mailbox}<p>No passkey is enrolled yet. Paste the one-time bootstrap token "
            "to create the owner's first passkey.</p>"
            '<form id="enrol" data-action="enrol">'
            '<label for="bootstrap-token">Bootstrap token</label>'
            '<input id="bootstrap-token" name="bootstrap_token" autocomplete="off" required>'
            '<button id="enrol-button" type="submit">Create passkey</button></form>'
        )
        return render("Set up Angelos", body + _status(), csrf)
    body = (
        f"{mailbox}<p>Sign in with your passkey to continue.</p>"
        f'<form id="sign-in" data-action="sign-in"{_next(next_path)}>'
        '<button id="sign-in-button" type="submit">Sign in with a passkey</button></form>'
    )
    return render("Sign in to Angelos", body + _status(), csrf)


def consent_page(
    *,
    csrf: str,
    request_id: str,
    client_name: str,
    redirect_uri: str,
    scopes: Sequence[Scope],
    mail_from: str,
    client_host: str | None = None,
    self_registered: bool = False,
) -> web.Response:
    """The consent page: who asks (and, for a metadata document client, the host its client ID
    lives on; a self-registered client marked so), where the answer goes, for which mailbox
    and scopes."""
    parts = urlsplit(redirect_uri)
    callback_origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    where = escape(parts.hostname or "")
    if parts.scheme == "http":
        where += " (an application on this computer)"
    elif parts.scheme != "https":
        where = f"the application that opens <code>{escape(parts.scheme)}:</code> links"
    published = (
        ""
        if client_host is None
        else f' Its client ID is published at <strong class="client-host">'
        f"{escape(client_host)}</strong>."
    )
    if self_registered:
        published += f' <span class="self-registered">({escape(SELF_REGISTERED)})</span>'
    items = []
    for scope in scopes:
        label = f"{escape(SCOPE_TEXT.get(scope, scope))} <code>{escape(scope)}</code>"
        if scope == BASE_SCOPE:  # every grant includes it
            control = f'<input type="hidden" name="scope" value="{BASE_SCOPE}">'
            items.append(f"<li>{control}<span>{label}</span> (always included)</li>")
        else:
            box = f'<input type="checkbox" name="scope" value="{escape(scope)}" checked>'
            items.append(f"<li><label>{box} {label}</label></li>")
    body = (
        f'<p><strong class="client">{escape(client_name)}</strong> asks for access to the '
        f'mailbox <strong class="mailbox">{escape(mail_from)}</strong>.{published}</p>'
        f'<p>After your answer it will be sent to <strong class="host">{where}</strong>.</p>'
        '<form id="consent" method="post" action="/oauth/consent">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        f'<input type="hidden" name="request" value="{escape(request_id)}">'
        f'<ul class="scopes">{"".join(items)}</ul>'
        '<div class="actions">'
        '<button id="approve" type="submit" name="decision" value="approve">Allow</button>'
        '<button id="deny" type="submit" name="decision" value="deny" class="secondary">'
        "Deny</button></div></form>"
    )
    return render("Allow access?", body, csrf, form_target=callback_origin)


def grants_page(
    *,
    csrf: str,
    grants: Sequence[GrantEntry],
    passkeys: int,
    mail_from: str,
    self_registered: Callable[[str], bool] = lambda client_id: False,
) -> web.Response:
    """The owner's grants (newest first) with revoke buttons, the passkey count and logout;
    a self-registered client is marked so beside its name."""
    rows = []
    for entry in grants:
        grant = entry.grant
        mark = (
            f' <span class="self-registered">({escape(SELF_REGISTERED)})</span>'
            if self_registered(grant.client_id)
            else ""
        )
        rows.append(
            f'<tr><td class="client">{escape(grant.client_name)}{mark}</td>'
            f"<td>{escape(' '.join(grant.scopes))}</td>"
            f"<td>{_day(grant.created_unix)}</td><td>{_day(grant.expires_unix)}</td>"
            '<td><form method="post" action="/oauth/grants">'
            f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
            f'<input type="hidden" name="grant" value="{escape(entry.handle)}">'
            '<button type="submit" class="revoke secondary">Revoke</button></form></td></tr>'
        )
    table = (
        '<table id="grants"><thead><tr><th>Client</th><th>Scopes</th><th>Granted</th>'
        f"<th>Expires</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else '<p id="no-grants">No client has access.</p>'
    )
    plural = "" if passkeys == 1 else "s"
    body = (
        f'<p class="mailbox">Mailbox <strong>{escape(mail_from)}</strong></p>'
        f"<h2>Clients with access</h2>{table}"
        f'<h2>Passkeys</h2><p id="passkeys">{passkeys} passkey{plural} enrolled.</p>'
        '<form id="add-passkey" data-action="add-passkey">'
        '<button type="submit" class="secondary">Add a passkey</button></form>'
        f"{_status()}"
        '<form id="logout" method="post" action="/oauth/logout">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        '<button type="submit" class="secondary">Sign out</button></form>'
    )
    return render("Angelos access", body, csrf)


def error_page(status: int, message: str) -> web.Response:
    """A short page saying what went wrong."""
    return render("Something went wrong", f'<p id="error">{escape(message)}</p>', status=status)


def refusal_page(status: int, rule: str) -> web.Response:
    """The page for an authorization request that cannot be sent back: which check failed."""
    fallback = METADATA_REFUSED if rule.startswith("client_metadata_") else ""
    reason = REFUSAL_TEXT.get(rule, fallback or "The request is malformed.")
    body = (
        f'<p id="error">{escape(reason)}</p>'
        "<p>The application was not sent an answer, because its request could not be trusted. "
        "If you set this application up, compare its client ID and callback address with the "
        "clients this server is configured for.</p>"
        f'<p>Check: <code id="rule">{escape(rule or "malformed_request")}</code></p>'
    )
    return render("This connection request was refused", body, status=status)


def _next(path: str | None) -> str:
    return "" if path is None else f' data-next="{escape(path)}"'


def _status() -> str:
    return '<p id="status" role="status"></p>'


def _day(unix: int) -> str:
    return escape(time.strftime("%Y-%m-%d", time.gmtime(unix)))
