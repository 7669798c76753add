"""Token requests to a pinned token endpoint: the refresh grant, the guarded POST, the checks.

Every request goes only to a pinned host on port 443, through the vetted resolver (no private
address, ever), with verified TLS, no proxy, no redirect, no keep-alive and no compression, all
within the mailbox timeout. A refresh answer must be a 200 with one strict JSON object of at most
64 KiB; anything else fails closed with a short message that never repeats what the provider
said.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import aiohttp
from msgspec import Struct

from providers.netsafety import tls_context
from providers.oauth2.profiles import PINNED_TOKEN_HOSTS, RefreshGrant
from providers.off_loop import off_loop
from providers.vetted_http import VettedResolver
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from schemas.strict_json import StrictJsonError, parse_object

MAX_BODY_BYTES: Final = 64 * 1024
MAX_HEADER_BYTES: Final = 16 * 1024
MAX_HEADER_COUNT: Final = 64
MAX_TOKEN_BYTES: Final = 16 * 1024  # an access token, or a rotated refresh token
MAX_LIFETIME_S: Final = 24 * 3600  # a longer promise is cut to a day (and never overflows)
EARLY_MARGIN_S: Final = 30.0
_READ_CHUNK: Final = 16 * 1024
# RFC 6750's b64token: the character class holds no "=", so matching is one linear pass.
BEARER_TOKEN_SYNTAX = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
REFRESH_TOKEN_SYNTAX = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no space
_REFUSED_GRANT_ERRORS: Final = frozenset({"invalid_grant", "invalid_client", "unauthorized_client"})
_REFUSED_GRANT_STATUSES: Final = frozenset({400, 401})


class AnswerRefused(ValueError):
    """A token endpoint's answer broke a rule; the message is the rule's short name only."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


class GrantRefused(ServiceUnavailable):
    """The provider refused the refresh token or the client: only a new grant helps."""


class TokenAnswer(Struct, frozen=True):
    """What a checked 200 answer holds."""

    access_token: Secret
    lifetime_s: int
    refresh_token: Secret | None  # a rotated refresh token, only for grants that rotate


class Refreshed(Struct, frozen=True):
    """A new access token, until when to use it (monotonic clock), and any rotated refresh token."""

    access_token: Secret
    usable_until: float
    refresh_token: Secret | None


def usable_until(start: float, lifetime_s: int) -> float:
    """The end of a token's use: its lifetime from `start`, less 30 s or a tenth, the smaller."""
    lifetime = min(lifetime_s, MAX_LIFETIME_S)
    return start + lifetime - min(EARLY_MARGIN_S, lifetime / 10)


def check_token_answer(body: bytes, grant: RefreshGrant) -> TokenAnswer:
    """Check a 200 answer's body against the grant's rules, or raise AnswerRefused."""
    if len(body) > MAX_BODY_BYTES:
        raise AnswerRefused("too-large")
    try:
        members = parse_object(body)
    except StrictJsonError as error:
        rule = error.rule
    else:
        rule = ""
    if rule:  # raised outside the except block: no parser error (and no body) in the chain
        raise AnswerRefused(rule)
    if "error" in members:
        refused = members["error"] in _REFUSED_GRANT_ERRORS
        raise AnswerRefused("grant-refused" if refused else "error")
    access_token = _access_token(members.get("access_token"))
    lifetime_s = _lifetime(members.get("token_type"), members.get("expires_in"))
    if grant.scope_rule == "graph":
        _check_graph_scope(members.get("scope"), grant.required_scopes)
    elif "scope" in members:
        _check_scope(members["scope"], grant.required_scopes)
    return TokenAnswer(access_token, lifetime_s, _rotated(members, grant))


def _access_token(value: Any) -> Secret:
    if (
        not isinstance(value, str)
        or len(value) > MAX_TOKEN_BYTES
        or BEARER_TOKEN_SYNTAX.fullmatch(value) is None
    ):
        raise AnswerRefused("access_token")
    return Secret(value)


def _lifetime(token_type: Any, expires_in: Any) -> int:
    if not isinstance(token_type, str) or not token_type.isascii():
        raise AnswerRefused("token_type")
    if token_type.lower() != "bearer":
        raise AnswerRefused("token_type")
    # bool is an int in Python; JSON's true is not a lifetime.
    if type(expires_in) is not int or expires_in <= 0:
        raise AnswerRefused("expires_in")
    return expires_in


def _check_scope(scope: Any, required: tuple[str, ...]) -> None:
    # A space-separated list (RFC 6749 section 3.3); split() on one character is linear.
    if not isinstance(scope, str) or not set(required) <= set(scope.split(" ")):
        raise AnswerRefused("scope")


def _check_graph_scope(scope: Any, required: tuple[str, ...]) -> None:
    # Graph answers name the granted scopes in URL form or short form (`Mail.Send`), and Microsoft
    # treats permission names case-insensitively, so both sides are compared lower-cased (ASCII
    # only: a non-ASCII scope can never match). An answer without `scope` is refused.
    if not isinstance(scope, str) or not scope.isascii():
        raise AnswerRefused("scope")
    granted = set(scope.lower().split(" "))
    for wanted in required:
        full = wanted.lower()
        short = full.rsplit("/", 1)[-1]
        if full not in granted and short not in granted:
            raise AnswerRefused("scope")


def _rotated(members: dict[str, Any], grant: RefreshGrant) -> Secret | None:
    if not grant.rotates_refresh_token or "refresh_token" not in members:
        return None  # Google's, if any, is ignored: the configured token stays the grant
    value = members["refresh_token"]
    if (
        not isinstance(value, str)
        or len(value) > MAX_TOKEN_BYTES
        or REFRESH_TOKEN_SYNTAX.fullmatch(value) is None
    ):
        raise AnswerRefused("refresh_token")
    return Secret(value)


async def refresh_access_token(
    grant: RefreshGrant,
    refresh_token: Secret,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Refreshed:
    """Send one refresh request for `grant`; every failure is a ServiceUnavailable."""
    start = clock()
    status, body = await post_form(
        grant.provider, grant.token_url, _form(grant, refresh_token), timeout_s=timeout_s
    )
    if status in _REFUSED_GRANT_STATUSES:
        raise GrantRefused(_refused(grant))
    if status != 200:
        raise ServiceUnavailable(_status_failure(grant.provider, status))
    try:
        answer = check_token_answer(body, grant)
    except AnswerRefused as refusal:
        rule = refusal.rule
    else:
        return Refreshed(
            answer.access_token, usable_until(start, answer.lifetime_s), answer.refresh_token
        )
    # Raised outside the except block, so nothing of the answer rides along as context.
    if rule == "grant-refused":
        raise GrantRefused(_refused(grant))
    raise ServiceUnavailable(f"the {grant.provider} token endpoint's answer was refused ({rule})")


async def post_form(
    provider: str, token_url: str, form: bytes, *, timeout_s: float
) -> tuple[int, bytes]:
    """POST `form` to a pinned token endpoint: (status, body), the body read for a 200 only.

    Network failures, a timeout and an answer over the limits are ServiceUnavailable; what the
    status means is the caller's to say.
    """
    if not is_pinned_token_url(token_url):
        raise ValueError("the token endpoint must be https on a pinned provider host")
    try:  # the first call reads the system's roots from disk: not on the loop
        context = await off_loop(tls_context, None)
    except (OSError, ssl.SSLError):
        raise ServiceUnavailable("the system's CA certificates cannot be loaded") from None
    unreachable = rule = ""
    # Each failure is raised after its except block, so no aiohttp error rides along as context.
    try:
        async with asyncio.timeout(timeout_s):
            return await _post(token_url, form, context, timeout_s)
    except TimeoutError:  # ours, and aiohttp's own ServerTimeoutError
        unreachable = "timed out"
    except ServiceUnavailable:  # the vetted resolver refused the name or one of its addresses
        unreachable = "its name does not resolve to public addresses only"
    except aiohttp.ClientConnectorCertificateError:
        unreachable = "its TLS certificate did not verify"
    except AnswerRefused as refusal:
        rule = refusal.rule
    except aiohttp.ClientResponseError:
        rule = "malformed-http"
    except (aiohttp.ClientError, OSError):
        unreachable = "the connection failed"
    if unreachable:
        raise ServiceUnavailable(
            f"the {provider} token endpoint could not be reached ({unreachable})"
        )
    raise ServiceUnavailable(f"the {provider} token endpoint's answer was refused ({rule})")


def is_pinned_token_url(url: str) -> bool:
    """Tell whether `url` is https on a pinned token host, port 443, with no query or fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and parts.netloc in PINNED_TOKEN_HOSTS  # no user info, no explicit port
        and parts.path.startswith("/")
        and not parts.query
        and not parts.fragment
    )


def _status_failure(provider: str, status: int) -> str:
    if 300 <= status < 400:
        return f"the {provider} token endpoint answered with a redirect (never followed)"
    return f"the {provider} token endpoint answered HTTP {status}"


def _refused(grant: RefreshGrant) -> str:
    return (
        f"the {grant.provider} token endpoint refused the refresh token or client: {grant.recovery}"
    )


def _form(grant: RefreshGrant, refresh_token: Secret) -> bytes:
    fields = [("grant_type", "refresh_token"), ("client_id", grant.client_id)]
    if grant.client_secret is not None:
        fields.append(("client_secret", grant.client_secret.reveal()))
    fields.append(("refresh_token", refresh_token.reveal()))
    if grant.form_scope is not None:
        fields.append(("scope", grant.form_scope))
    return urlencode(fields).encode("ascii")


_HEADERS: Final = {
    "Accept": "application/json",
    "Accept-Encoding": "identity",
    "Content-Type": "application/x-www-form-urlencoded",
}


async def _post(
    token_url: str, form: bytes, context: ssl.SSLContext, timeout_s: float
) -> tuple[int, bytes]:
    connector = aiohttp.TCPConnector(
        resolver=VettedResolver(allow_private_hosts=False),  # the test seam alone reaches loopback
        ssl=context,
        use_dns_cache=False,
        force_close=True,  # no keep-alive: one request, one connection
        limit=1,
    )
    async with (
        aiohttp.ClientSession(
            connector=connector,
            trust_env=False,  # HTTPS_PROXY and friends are never used
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(
                total=timeout_s, sock_connect=timeout_s, sock_read=timeout_s
            ),
            auto_decompress=False,
            max_line_size=MAX_HEADER_BYTES,
            max_field_size=MAX_HEADER_BYTES,
            max_headers=MAX_HEADER_COUNT,
        ) as session,
        session.post(
            token_url,
            data=form,
            headers=_HEADERS,
            allow_redirects=False,
        ) as response,
    ):
        if sum(len(name) + len(value) + 4 for name, value in response.raw_headers) > (
            MAX_HEADER_BYTES
        ):
            raise AnswerRefused("headers-too-large")
        if response.status != 200:
            return response.status, b""
        return 200, await _read_body(response)


async def _read_body(response: aiohttp.ClientResponse) -> bytes:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding != "identity":
        raise AnswerRefused("compressed")
    declared = response.content_length
    if declared is not None and declared > MAX_BODY_BYTES:
        raise AnswerRefused("too-large")
    body = bytearray()
    async for chunk in response.content.iter_chunked(_READ_CHUNK):
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise AnswerRefused("too-large")  # stop reading: the rest is never taken in
    return bytes(body)
