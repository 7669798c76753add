"""A browserless client of the OAuth test peer (tests/support/oauth) run by scripts/test-services.

The issuer is at $ANGELOS_TEST_OIDC_ISSUER, serves TLS with the per-run test CA
($MAIL_TLS_CA_FILE) and signs in whoever types a name on its development login page. This
module plays the user's browser for it (login, then consent), gets real tokens for a chosen
subject and resource, and builds the mcp SDK's own OAuth client wired to the same pages. Every
request goes to a loopback https URL and is verified against the test CA.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import aiohttp
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

DEFAULT_SCOPES = "mail.read mail.write mail.send"
# A native client's loopback redirect (RFC 8252): the issuer sends the browser there at the
# end, and nothing here ever follows it.
REDIRECT_URI = "http://127.0.0.1/oauth/callback"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_STEPS = 10  # authorize -> login page -> resume -> consent page -> resume -> redirect is 5
TIMEOUT = aiohttp.ClientTimeout(total=10)


class OAuthError(Exception):
    """The issuer refused a request with an OAuth error code (e.g. invalid_grant)."""

    def __init__(self, error: str, description: str, status: int | None = None) -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description
        self.status = status


@dataclass(frozen=True)
class OidcPeer:
    """Where the test issuer listens and which CA its certificate chains to."""

    issuer: str
    jwks_url: str
    ca_file: str

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts only the per-run test CA."""
        return ssl.create_default_context(cafile=self.ca_file)


def peer_from_env(environ: Mapping[str, str] | None = None) -> OidcPeer:
    """The issuer scripts/test-services started, from the variables it exports."""
    e = os.environ if environ is None else environ
    missing = [
        k
        for k in ("ANGELOS_TEST_OIDC_ISSUER", "ANGELOS_TEST_OIDC_JWKS_URL", "MAIL_TLS_CA_FILE")
        if not e.get(k)
    ]
    if missing:
        raise RuntimeError(f"not under scripts/test-services: {', '.join(missing)} unset")
    return OidcPeer(
        issuer=e["ANGELOS_TEST_OIDC_ISSUER"],
        jwks_url=e["ANGELOS_TEST_OIDC_JWKS_URL"],
        ca_file=e["MAIL_TLS_CA_FILE"],
    )


def _require_loopback_https(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError("the OAuth test driver only talks https to loopback hosts")


def _session(peer: OidcPeer) -> aiohttp.ClientSession:
    # The issuer keeps the interaction in cookies scoped to `localhost`; aiohttp's jar keeps
    # those (it is IP-address hosts that need unsafe=True, and the issuer is not one).
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=peer.ssl_context()),
        timeout=TIMEOUT,
        trust_env=False,
    )


@dataclass
class _Form:
    action: str
    method: str
    fields: dict[str, str]


class _FormParser(HTMLParser):
    """Collects each <form> with its <input name=... value=...> members."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[_Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(_Form(a.get("action", ""), a.get("method", "get").lower(), {}))
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1].fields[a["name"]] = a.get("value", "")


def _only_form(html: str) -> _Form:
    parser = _FormParser()
    parser.feed(html)
    if len(parser.forms) != 1:
        raise RuntimeError(f"expected one form on the interaction page, found {len(parser.forms)}")
    return parser.forms[0]


def _same_endpoint(url: str, target: str) -> bool:
    a, b = urlsplit(url), urlsplit(target)
    return (a.scheme, a.netloc, a.path) == (b.scheme, b.netloc, b.path)


async def authorize_without_browser(
    authorization_url: str, subject: str, *, peer: OidcPeer | None = None
) -> str:
    """Walks the issuer's login (as `subject`) and consent pages; returns the final redirect URL."""
    peer = peer or peer_from_env()
    redirect_uris = parse_qs(urlsplit(authorization_url).query).get("redirect_uri", [])
    if len(redirect_uris) != 1:
        raise ValueError("the authorization URL must carry exactly one redirect_uri")
    redirect_uri = redirect_uris[0]
    url, method, data = authorization_url, "GET", None
    async with _session(peer) as http:
        for _ in range(MAX_STEPS):
            _require_loopback_https(url)
            async with http.request(method, url, data=data, allow_redirects=False) as response:
                body = await response.text()
                location = response.headers.get("Location")
                if response.status in (302, 303) and location:
                    url, method, data = urljoin(url, location), "GET", None
                    if _same_endpoint(url, redirect_uri):
                        return url
                    continue
                if response.status != 200:
                    raise RuntimeError(f"the issuer answered {response.status} at {url}")
            form = _only_form(body)
            fields = dict(form.fields)
            if fields.get("prompt") == "login":
                fields.update(login=subject, password="unused by the development login")
            elif fields.get("prompt") != "consent":
                raise RuntimeError(f"unexpected interaction {fields.get('prompt')!r}")
            url, method, data = urljoin(url, form.action), form.method.upper(), fields
    raise RuntimeError(f"no redirect to the client after {MAX_STEPS} steps")


def redirect_result(final_url: str) -> AuthorizationCodeResult:
    """The code, state and iss of an authorization response; raises OAuthError for an error one."""
    query = parse_qs(urlsplit(final_url).query)

    def one(name: str) -> str | None:
        values = query.get(name)
        if values is not None and len(values) != 1:
            raise ValueError(f"the authorization response repeats {name}")
        return values[0] if values else None

    error = one("error")
    if error is not None:
        raise OAuthError(error, one("error_description") or "")
    code = one("code")
    if code is None:
        raise ValueError("the authorization response has neither code nor error")
    return AuthorizationCodeResult(code=code, state=one("state"), iss=one("iss"))


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    body: dict[str, Any] = await response.json(content_type=None)
    if response.status >= 400:
        raise OAuthError(
            str(body.get("error", "")), str(body.get("error_description", "")), response.status
        )
    return body


async def server_metadata(peer: OidcPeer | None = None) -> dict[str, Any]:
    """The issuer's RFC 8414 authorization server metadata."""
    peer = peer or peer_from_env()
    url = f"{peer.issuer}/.well-known/oauth-authorization-server"
    _require_loopback_https(url)
    async with _session(peer) as http, http.get(url) as response:
        return await _json(response)


async def register_public_client(
    peer: OidcPeer | None = None, *, redirect_uri: str = REDIRECT_URI
) -> str:
    """Registers a public native client (RFC 7591) allowed to refresh; returns its client_id."""
    peer = peer or peer_from_env()
    meta = await server_metadata(peer)
    url = meta["registration_endpoint"]
    _require_loopback_https(url)
    request = {
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "client_name": "angelos tests",
    }
    async with _session(peer) as http, http.post(url, json=request) as response:
        return str((await _json(response))["client_id"])


async def _token_request(peer: OidcPeer, form: dict[str, str]) -> dict[str, Any]:
    url = (await server_metadata(peer))["token_endpoint"]
    _require_loopback_https(url)
    async with _session(peer) as http, http.post(url, data=form) as response:
        return await _json(response)


def pkce_pair() -> tuple[str, str]:
    """A fresh (code_verifier, S256 code_challenge) pair (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


async def issue_token(
    subject: str,
    resource: str,
    scopes: str = DEFAULT_SCOPES,
    *,
    peer: OidcPeer | None = None,
) -> dict[str, Any]:
    """Registers a client, authorizes it as `subject` for `resource` and returns the token response.

    The response is the issuer's JSON plus `client_id`, which a refresh needs.
    """
    peer = peer or peer_from_env()
    meta = await server_metadata(peer)
    client_id = await register_public_client(peer)
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(16)
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": scopes,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    final = await authorize_without_browser(
        f"{meta['authorization_endpoint']}?{urlencode(query)}", subject, peer=peer
    )
    result = redirect_result(final)
    if result.state != state or result.iss != peer.issuer:
        raise RuntimeError("the authorization response does not match the request")
    tokens = await _token_request(
        peer,
        {
            "grant_type": "authorization_code",
            "code": result.code,
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        },
    )
    return {**tokens, "client_id": client_id}


async def refresh_token(
    refresh_token: str,
    client_id: str,
    resource: str | None = None,
    *,
    peer: OidcPeer | None = None,
) -> dict[str, Any]:
    """Redeems a refresh token at the token endpoint; raises OAuthError when it is refused."""
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
    if resource is not None:
        form["resource"] = resource
    return await _token_request(peer or peer_from_env(), form)


class MemoryTokenStorage:
    """The SDK's TokenStorage, kept in memory for one test."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any."""
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Stores the tokens."""
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration, if any."""
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Stores the client registration."""
        self.client_info = client_info


class BrowserlessUser:
    """The SDK client's redirect and callback handlers: a user who signs in at the test issuer."""

    def __init__(self, subject: str, peer: OidcPeer) -> None:
        self.subject = subject
        self.peer = peer
        self.authorization_urls: list[str] = []
        self.final_redirects: list[str] = []

    async def redirect(self, authorization_url: str) -> None:
        """What the SDK calls to "open the browser": walk the pages, keep the final redirect."""
        self.authorization_urls.append(authorization_url)
        self.final_redirects.append(
            await authorize_without_browser(authorization_url, self.subject, peer=self.peer)
        )

    async def callback(self) -> AuthorizationCodeResult:
        """What the SDK calls to "wait for the redirect": the code, state and iss it carried."""
        return redirect_result(self.final_redirects[-1])


def sdk_oauth_provider(
    server_url: str,
    subject: str,
    *,
    peer: OidcPeer | None = None,
    redirect_uri: str = REDIRECT_URI,
    storage: MemoryTokenStorage | None = None,
    user: BrowserlessUser | None = None,
) -> OAuthClientProvider:
    """The mcp SDK's OAuth client for `server_url` (public, DCR), signing in as `subject`.

    The provider sends its own requests (metadata, registration, token) through whichever
    httpx2 client it is the `auth` of: give it one from `sdk_http_client`, which trusts the CA.
    Pass `user` to see the authorization URLs it was sent to and the redirects it got back.
    """
    user = user or BrowserlessUser(subject, peer or peer_from_env())
    metadata = OAuthClientMetadata(
        redirect_uris=[AnyUrl(redirect_uri)],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        client_name="angelos tests (mcp SDK client)",
    )
    provider = OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=storage or MemoryTokenStorage(),
        redirect_handler=user.redirect,
        callback_handler=user.callback,
    )
    return provider


def sdk_http_client(
    auth: httpx2.Auth | None = None, *, peer: OidcPeer | None = None
) -> httpx2.AsyncClient:
    """An httpx2 client for the SDK's transport and OAuth flow, trusting only the test CA."""
    peer = peer or peer_from_env()
    return httpx2.AsyncClient(
        auth=auth,
        verify=peer.ssl_context(),
        trust_env=False,
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
