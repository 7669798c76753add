"""ChatGPT as a client: its pinned client-metadata document, fetched and checked, then cached.

Only one client-metadata URL is accepted, with one callback. The document is fetched at
authorization time only (never at token redemption, which uses the pinned identity), through
the guarded GET, at most 12 times a minute across instances, and kept five minutes (less when
its Cache-Control says so). A failed fetch is remembered for five seconds, and expired
metadata is never used again after a failed refetch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from service.config import CHATGPT_CLIENT_ID
from service.wire.outbound import FetchFailed, OutboundGet
from service.wire.strict_json import StrictJsonError, parse_object

CHATGPT_CALLBACK: Final = "https://chatgpt.com/connector_platform_oauth_redirect"
CHATGPT_NAME: Final = "ChatGPT"
MAX_DOCUMENT_BYTES: Final = 32768
CACHE_S: Final = 300
FAILURE_HOLD_S: Final = 5.0
REQUIRED: Final = ("client_id", "client_name", "redirect_uris", "grant_types", "response_types")
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)\s*(?:,|$)", re.IGNORECASE)


class PinnedClient(msgspec.Struct, frozen=True):
    """The client as the pinned identity allows it: one ID, its name, its one callback."""

    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]


CHATGPT: Final = PinnedClient(CHATGPT_CLIENT_ID, CHATGPT_NAME, (CHATGPT_CALLBACK,))


class MetadataRefused(Exception):
    """The document breaks a rule; the message names the rule only."""


class ClientMetadataUnavailable(Exception):
    """The client cannot be resolved now: 503, or 429 when the fetch budget is spent."""

    def __init__(self, status: int) -> None:
        super().__init__("client metadata unavailable")
        self.status = status


def check_document(body: bytes, media_type: str) -> PinnedClient:
    """Check a fetched document against the pinned identity, or raise MetadataRefused."""
    if media_type != "application/json":
        raise MetadataRefused("media-type")
    try:
        document = parse_object(body, casefold_names=True)
    except StrictJsonError as error:
        rule = error.rule
    else:
        return _pinned(document)
    raise MetadataRefused(rule)


def _pinned(document: dict[str, Any]) -> PinnedClient:
    if any(name not in document for name in REQUIRED):
        raise MetadataRefused("missing-member")
    if document["client_id"] != CHATGPT_CLIENT_ID or document["client_name"] != CHATGPT_NAME:
        raise MetadataRefused("identity")
    methods = document.get("token_endpoint_auth_methods_supported")
    if methods is None:  # the plural list wins when both are present
        single = document.get("token_endpoint_auth_method")
        methods = [single] if single is not None else None
    if not isinstance(methods, list) or not _strings(methods) or "none" not in methods:
        raise MetadataRefused("auth-method")
    grants = document["grant_types"]
    if not _strings(grants) or not {"authorization_code", "refresh_token"} <= set(grants):
        raise MetadataRefused("grant-types")
    responses = document["response_types"]
    if not _strings(responses) or "code" not in responses:
        raise MetadataRefused("response-types")
    uris = document["redirect_uris"]
    if not _strings(uris) or not 1 <= len(uris) <= 8 or set(uris) != {CHATGPT_CALLBACK}:
        raise MetadataRefused("redirect-uris")
    return CHATGPT


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def cache_seconds(cache_control: str) -> int:
    """Five minutes, shortened by max-age; nothing for no-store or no-cache."""
    lowered = cache_control.lower()
    if "no-store" in lowered or "no-cache" in lowered:
        return 0
    found = _MAX_AGE.search(cache_control)
    return min(CACHE_S, int(found.group(1))) if found else CACHE_S


class ClientMetadataResolver:
    """Resolve the pinned client, with the process cache, the failure hold and the budget."""

    def __init__(
        self,
        spend_budget: Callable[[], Awaitable[bool]],
        *,
        url: str = CHATGPT_CLIENT_ID,
        ca_file: str | None = None,
        allow_private_hosts: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spend_budget = spend_budget  # the shared fetch budget (False: spent)
        self.url = url  # only tests point it elsewhere
        self.client = OutboundGet(
            ca_file, allow_private_hosts, total_s=5.0, step_s=3.0, max_bytes=MAX_DOCUMENT_BYTES
        )
        self.clock = clock
        self._until = 0.0  # cached metadata is good until then
        self._failed_at: float | None = None
        self.fetches = 0

    async def resolve(self) -> PinnedClient:
        """Return the pinned client, or raise ClientMetadataUnavailable."""
        now = self.clock()
        if now < self._until:
            return CHATGPT
        if self._failed_at is not None and now - self._failed_at < FAILURE_HOLD_S:
            raise ClientMetadataUnavailable(503)
        if not await self.spend_budget():
            raise ClientMetadataUnavailable(429)
        self.fetches += 1
        try:
            fetched = await self.client.get(self.url)
            client = check_document(fetched.body, fetched.media_type)
        except (FetchFailed, MetadataRefused):
            self._until, self._failed_at = 0.0, self.clock()
            raise ClientMetadataUnavailable(503) from None
        self._failed_at = None
        self._until = self.clock() + cache_seconds(fetched.cache_control)
        return client

    async def aclose(self) -> None:
        """Close the HTTP session."""
        await self.client.aclose()
