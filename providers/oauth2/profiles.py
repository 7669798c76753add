"""What one refresh grant is: the pinned token endpoint, the client, the token, and the rules.

Google and Microsoft differ in small ways that matter: Microsoft wants the scopes named in the
refresh request and hands back a new refresh token each time (the old one keeps working for a
while, but the newest is the one to use next), while Google's scope is fixed by the grant and a
refresh token it returns is ignored. Microsoft's Graph grant (the `microsoft` provider) is a
third profile of the same request, with its own scopes and its own recovery. The token
endpoints are pinned here and nowhere else: no setting, argument or answer can send a client
secret or refresh token to another host.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from msgspec import Struct

from schemas.secret import Secret

TOKEN_PORT: Final = 443
GOOGLE_TOKEN_HOST: Final = "oauth2.googleapis.com"
MICROSOFT_TOKEN_HOST: Final = "login.microsoftonline.com"
PINNED_TOKEN_HOSTS: Final = frozenset({GOOGLE_TOKEN_HOST, MICROSOFT_TOKEN_HOST})

GOOGLE_MAIL_SCOPE: Final = "https://mail.google.com/"
OUTLOOK_IMAP_SCOPE: Final = "https://outlook.office.com/IMAP.AccessAsUser.All"
OUTLOOK_SMTP_SCOPE: Final = "https://outlook.office.com/SMTP.Send"
# What an Outlook grant asks for, at consent and at each refresh.
OUTLOOK_GRANT_SCOPE: Final = f"{OUTLOOK_IMAP_SCOPE} {OUTLOOK_SMTP_SCOPE} offline_access"
GRAPH_RESOURCE: Final = "https://graph.microsoft.com/"
GRAPH_USER_READ: Final = f"{GRAPH_RESOURCE}User.Read"
GRAPH_MAIL_READWRITE: Final = f"{GRAPH_RESOURCE}Mail.ReadWrite"
GRAPH_MAIL_SEND: Final = f"{GRAPH_RESOURCE}Mail.Send"
GRAPH_SCOPES: Final = (GRAPH_USER_READ, GRAPH_MAIL_READWRITE, GRAPH_MAIL_SEND)
# What a Graph refresh asks for; the consent adds offline_access, which brings the refresh token.
GRAPH_REFRESH_SCOPE: Final = " ".join(GRAPH_SCOPES)
GRAPH_CONSENT_SCOPE: Final = f"{GRAPH_REFRESH_SCOPE} offline_access"
GOOGLE_TOKEN_PATH: Final = "/token"
GOOGLE_TOKEN_URL: Final = f"https://{GOOGLE_TOKEN_HOST}{GOOGLE_TOKEN_PATH}"

GOOGLE_RECOVERY: Final = "run `angelos google-auth` and set GOOGLE_REFRESH_TOKEN to the new token"
MICROSOFT_RECOVERY: Final = (
    "run `angelos outlook-auth` and set MICROSOFT_REFRESH_TOKEN to the new token"
)
GRAPH_RECOVERY: Final = (
    "run `angelos microsoft-auth` and set MICROSOFT_REFRESH_TOKEN to the new token"
)

# A directory tenant is a GUID, a verified domain, or one of the well-known names (common,
# organizations, consumers): DNS-label characters only, so it can never bend the URL's path.
_TENANT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_TOKEN_PATH = re.compile(r"(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+")  # no dot segments
# Graph takes one directory (a tenant UUID) or personal accounts (`consumers`), nothing wider.
_GRAPH_TENANT = re.compile(
    r"consumers|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)

# How an answer's `scope` is held against `required_scopes`: "exact" (Google, Outlook) wants
# each one verbatim; "graph" wants each one in its URL or short form, in any case (see refresh).
ScopeRule = Literal["exact", "graph"]


class RefreshGrant(Struct, frozen=True):
    """One OAuth refresh grant: where to send it, what to send, and what the answer must hold."""

    provider: str  # "Google" or "Microsoft": names the endpoint in error messages
    token_host: str  # one of PINNED_TOKEN_HOSTS, always dialled on TOKEN_PORT
    token_path: str
    client_id: str
    client_secret: Secret | None  # None for a public client (Microsoft only)
    refresh_token: Secret
    form_scope: str | None  # the `scope` form value; None sends no scope (Google)
    required_scopes: tuple[str, ...]  # an answer that names its scope must include all of these
    rotates_refresh_token: bool  # keep a returned refresh token for the next refresh
    recovery: str  # what the owner does when the grant is refused
    # "graph": the answer must name its scope, and a required scope counts in short form too
    scope_rule: ScopeRule = "exact"

    def __post_init__(self) -> None:
        if self.token_host not in PINNED_TOKEN_HOSTS:
            raise ValueError("the token endpoint must be one of the pinned provider hosts")
        if _TOKEN_PATH.fullmatch(self.token_path) is None:
            raise ValueError("the token endpoint path is malformed")
        if not self.client_id or not self.client_id.isprintable():
            raise ValueError("the OAuth client id must be printable and not empty")
        if not self.refresh_token.reveal():
            raise ValueError("the refresh token is empty")
        if self.client_secret is not None and not self.client_secret.reveal():
            raise ValueError("the OAuth client secret is empty")

    @property
    def token_url(self) -> str:
        """The token endpoint's URL (https, the pinned host, port 443)."""
        return f"https://{self.token_host}{self.token_path}"


def valid_tenant(tenant: str) -> bool:
    """Tell whether `tenant` can name a Microsoft directory in the token endpoint's path."""
    return _TENANT.fullmatch(tenant) is not None


def google_grant(client_id: str, client_secret: Secret, refresh_token: Secret) -> RefreshGrant:
    """A Google refresh grant for IMAP and SMTP (scope https://mail.google.com/)."""
    return RefreshGrant(
        provider="Google",
        token_host=GOOGLE_TOKEN_HOST,
        token_path=GOOGLE_TOKEN_PATH,
        client_id=client_id,
        client_secret=client_secret,
        refresh_token=refresh_token,
        form_scope=None,
        required_scopes=(GOOGLE_MAIL_SCOPE,),
        rotates_refresh_token=False,
        recovery=GOOGLE_RECOVERY,
    )


def microsoft_token_path(tenant: str) -> str:
    """The path of a tenant's v2.0 token endpoint on the pinned Microsoft host."""
    return f"/{tenant}/oauth2/v2.0/token"


def microsoft_grant(
    tenant: str, client_id: str, client_secret: Secret | None, refresh_token: Secret
) -> RefreshGrant:
    """A Microsoft identity platform (v2.0) refresh grant for Outlook IMAP and SMTP."""
    if not valid_tenant(tenant):
        raise ValueError("the Microsoft tenant must be a GUID, a domain name or a well-known name")
    outlook = (OUTLOOK_IMAP_SCOPE, OUTLOOK_SMTP_SCOPE)
    return _microsoft(tenant, client_id, client_secret, refresh_token, OUTLOOK_GRANT_SCOPE, outlook)


def _microsoft(
    tenant: str,
    client_id: str,
    client_secret: Secret | None,
    refresh_token: Secret,
    form_scope: str,
    required: tuple[str, ...],
    *,
    recovery: str = MICROSOFT_RECOVERY,
    scope_rule: ScopeRule = "exact",
) -> RefreshGrant:
    """A v2.0 grant on a tenant's token endpoint; Microsoft always rotates refresh tokens."""
    return RefreshGrant(
        provider="Microsoft",
        token_host=MICROSOFT_TOKEN_HOST,
        token_path=microsoft_token_path(tenant),
        client_id=client_id,
        client_secret=client_secret,
        refresh_token=refresh_token,
        form_scope=form_scope,
        required_scopes=required,
        rotates_refresh_token=True,
        recovery=recovery,
        scope_rule=scope_rule,
    )


def valid_graph_tenant(tenant: str) -> bool:
    """Tell whether `tenant` is one Graph accepts here: a tenant UUID or exactly `consumers`."""
    return _GRAPH_TENANT.fullmatch(tenant) is not None


def graph_grant(
    tenant: str, client_id: str, client_secret: Secret, refresh_token: Secret
) -> RefreshGrant:
    """A Microsoft identity platform (v2.0) refresh grant for Microsoft Graph mail."""
    if not valid_graph_tenant(tenant):
        raise ValueError("the Graph tenant must be a tenant UUID or `consumers`")
    return _microsoft(
        tenant, client_id, client_secret, refresh_token, GRAPH_REFRESH_SCOPE, GRAPH_SCOPES,
        recovery=GRAPH_RECOVERY, scope_rule="graph",
    )  # fmt: skip
