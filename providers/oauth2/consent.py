"""The owner's consent for a refresh grant: PKCE, the sign-in address, and redeeming the code.

Used once, by `angelos google-auth` / `outlook-auth` / `microsoft-auth`, never by a serving
process. The code goes only to the same pinned token endpoint as every refresh, by the same
guarded POST.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Final
from urllib.parse import urlencode

from msgspec import Struct

from providers.oauth2.profiles import (
    GOOGLE_MAIL_SCOPE,
    GOOGLE_TOKEN_URL,
    GRAPH_CONSENT_SCOPE,
    MICROSOFT_TOKEN_HOST,
    OUTLOOK_GRANT_SCOPE,
    microsoft_token_path,
    valid_graph_tenant,
    valid_tenant,
)
from providers.oauth2.refresh import REFRESH_TOKEN_SYNTAX, post_form
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from schemas.strict_json import StrictJsonError, parse_object

GOOGLE_AUTHORIZE: Final = "https://accounts.google.com/o/oauth2/v2/auth"
MICROSOFT_AUTHORIZE: Final = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize"
_MAX_ANSWER: Final = 64 * 1024


class ConsentClient(Struct, frozen=True):
    """One OAuth client asking its owner for a refresh grant over a loopback redirect."""

    provider: str  # "Google" or "Microsoft"
    authorize_url: str
    token_url: str  # https on a pinned host
    client_id: str
    client_secret: Secret | None
    scope: str
    port: int
    redirect_uri: str
    refresh_variable: str  # where the owner puts the result
    extra: tuple[tuple[str, str], ...] = ()  # provider-specific authorization parameters
    login_hint: str | None = None


class PkcePair(Struct, frozen=True):
    """An RFC 7636 code verifier (kept secret) and its S256 challenge."""

    verifier: Secret
    challenge: str


def new_pkce() -> PkcePair:
    """A fresh verifier of 64 URL-safe characters and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    return PkcePair(Secret(verifier), challenge)


def new_state() -> str:
    """A random `state` that ties the browser's answer to this run."""
    return secrets.token_urlsafe(24)


def google_consent(
    client_id: str, client_secret: Secret, port: int, login_hint: str | None = None
) -> ConsentClient:
    """Google's consent for scope https://mail.google.com/, offline (a refresh token)."""
    return ConsentClient(
        provider="Google",
        authorize_url=GOOGLE_AUTHORIZE,
        token_url=GOOGLE_TOKEN_URL,
        client_id=client_id,
        client_secret=client_secret,
        scope=GOOGLE_MAIL_SCOPE,
        port=port,
        redirect_uri=f"http://127.0.0.1:{port}/callback",
        refresh_variable="GOOGLE_REFRESH_TOKEN",
        # A refresh token only comes with offline access, and again only when consent is shown.
        extra=(("access_type", "offline"), ("prompt", "consent")),
        login_hint=login_hint,
    )


def microsoft_consent(
    tenant: str,
    client_id: str,
    client_secret: Secret | None,
    port: int,
    login_hint: str | None = None,
) -> ConsentClient:
    """Microsoft's consent for Outlook IMAP and SMTP, with offline_access."""
    if not valid_tenant(tenant):
        raise ValueError("the Microsoft tenant must be a GUID, a domain name or a well-known name")
    # Entra matches http://localhost with any port for desktop apps.
    redirect = f"http://localhost:{port}/callback"
    return _microsoft(
        tenant, client_id, client_secret, OUTLOOK_GRANT_SCOPE, port, redirect, login_hint
    )


def graph_consent(
    tenant: str,
    client_id: str,
    client_secret: Secret,
    port: int,
    login_hint: str | None = None,
) -> ConsentClient:
    """Microsoft's consent for Graph mail (User.Read, Mail.ReadWrite, Mail.Send, offline_access).

    A confidential client: its secret is sent with the code here and with every refresh after.
    """
    if not valid_graph_tenant(tenant):
        raise ValueError("the Graph tenant must be a tenant UUID or `consumers`")
    # The address registered for the app (a web redirect URI matches exactly, port included).
    redirect = f"http://127.0.0.1:{port}/callback"
    return _microsoft(
        tenant, client_id, client_secret, GRAPH_CONSENT_SCOPE, port, redirect, login_hint
    )


def _microsoft(
    tenant: str,
    client_id: str,
    client_secret: Secret | None,
    scope: str,
    port: int,
    redirect_uri: str,
    login_hint: str | None,
) -> ConsentClient:
    """A consent on a tenant's v2.0 endpoints, for the refresh token in MICROSOFT_REFRESH_TOKEN."""
    return ConsentClient(
        provider="Microsoft",
        authorize_url=MICROSOFT_AUTHORIZE.format(tenant=tenant),
        token_url=f"https://{MICROSOFT_TOKEN_HOST}{microsoft_token_path(tenant)}",
        client_id=client_id,
        client_secret=client_secret,
        scope=scope,
        port=port,
        redirect_uri=redirect_uri,
        refresh_variable="MICROSOFT_REFRESH_TOKEN",
        extra=(("response_mode", "query"), ("prompt", "select_account")),
        login_hint=login_hint,
    )


def authorization_url(client: ConsentClient, pkce: PkcePair, state: str) -> str:
    """The address the owner opens in a browser."""
    fields = [
        ("client_id", client.client_id),
        ("response_type", "code"),
        ("redirect_uri", client.redirect_uri),
        ("scope", client.scope),
        ("state", state),
        ("code_challenge", pkce.challenge),
        ("code_challenge_method", "S256"),
        *client.extra,
    ]
    if client.login_hint:
        fields.append(("login_hint", client.login_hint))
    return f"{client.authorize_url}?{urlencode(fields)}"


async def redeem_code(
    client: ConsentClient, code: Secret, pkce: PkcePair, *, timeout_s: float
) -> Secret:
    """Exchange the code for the refresh token; every failure is ServiceUnavailable."""
    fields = [
        ("grant_type", "authorization_code"),
        ("code", code.reveal()),
        ("redirect_uri", client.redirect_uri),
        ("client_id", client.client_id),
        ("code_verifier", pkce.verifier.reveal()),
    ]
    if client.client_secret is not None:
        fields.append(("client_secret", client.client_secret.reveal()))
    if client.provider == "Microsoft":
        fields.append(("scope", client.scope))
    status, body = await post_form(
        client.provider, client.token_url, urlencode(fields).encode("ascii"), timeout_s=timeout_s
    )
    if status != 200:
        raise ServiceUnavailable(
            f"the {client.provider} token endpoint refused the code (HTTP {status}); "
            "run the command again"
        )
    return refresh_token_in(body, client.provider)


def refresh_token_in(body: bytes, provider: str) -> Secret:
    """The refresh token of a code-exchange answer, or ServiceUnavailable naming the rule."""
    refused = ServiceUnavailable(
        f"the {provider} token endpoint's answer held no usable refresh token; check that the "
        "client may ask for offline access, then run the command again"
    )
    if len(body) > _MAX_ANSWER:
        raise refused
    try:
        members = parse_object(body)
    except StrictJsonError:
        raise refused from None
    value = members.get("refresh_token")
    if "error" in members or not isinstance(value, str):
        raise refused
    if REFRESH_TOKEN_SYNTAX.fullmatch(value) is None or len(value) > 16 * 1024:
        raise refused
    return Secret(value)
