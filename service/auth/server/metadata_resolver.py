"""Fetching client metadata documents: the guarded GET, a short cache, a failure hold, a budget.

A document is fetched at authorization time only (never at token redemption, which uses the
identity bound into the code and the grant), through the guarded GET (vetted addresses only,
no redirects, 32 KiB, 5 s), within the fetch budgets the caller spends, and kept five minutes
(less when its Cache-Control says so). A failed fetch of a URL is remembered for five seconds,
and expired metadata is never used again after a failed refetch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from service.auth.server.client_metadata import (
    MAX_DOCUMENT_BYTES,
    MetadataClient,
    MetadataRefused,
    check_document,
)
from service.wire.outbound import FetchFailed, OutboundGet

CACHE_S: Final = 300
FAILURE_HOLD_S: Final = 5.0
MAX_CACHED: Final = 64
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)\s*(?:,|$)", re.IGNORECASE)


class ClientMetadataUnavailable(Exception):
    """The client cannot be resolved now; `rule` names why (never a value from the document)."""

    def __init__(self, status: int, rule: str) -> None:
        super().__init__(rule)
        self.status = status  # 503, 429 when a fetch budget is spent, 400 for a refused document
        self.rule = rule


def cache_seconds(cache_control: str) -> int:
    """Five minutes, shortened by max-age; nothing for no-store or no-cache."""
    lowered = cache_control.lower()
    if "no-store" in lowered or "no-cache" in lowered:
        return 0
    found = _MAX_AGE.search(cache_control)
    return min(CACHE_S, int(found.group(1))) if found else CACHE_S


class ClientMetadataResolver:
    """Resolve metadata clients by URL, with the per-URL cache, the failure hold and a budget."""

    def __init__(
        self,
        *,
        ca_file: str | None = None,
        allow_private_hosts: bool = False,
        clock: Callable[[], float] = time.monotonic,
        fetch_from: Mapping[str, str] | None = None,
    ) -> None:
        self.client = OutboundGet(
            ca_file, allow_private_hosts, total_s=5.0, step_s=3.0, max_bytes=MAX_DOCUMENT_BYTES
        )
        self.clock = clock
        # Only tests use it: where to fetch a client ID's document instead of the ID itself.
        self.fetch_from = dict(fetch_from or {})
        self._cached: dict[str, tuple[float, MetadataClient]] = {}
        self._failed_at: dict[str, float] = {}
        self.fetches = 0

    async def resolve(
        self, client_id: str, spend_budget: Callable[[], Awaitable[bool]]
    ) -> MetadataClient:
        """Return the client its document describes, or raise ClientMetadataUnavailable."""
        now = self.clock()
        cached = self._cached.get(client_id)
        if cached is not None and now < cached[0]:
            return cached[1]
        self._cached.pop(client_id, None)
        failed = self._failed_at.get(client_id)
        if failed is not None and now - failed < FAILURE_HOLD_S:
            raise ClientMetadataUnavailable(503, "client_metadata_unavailable")
        if not await spend_budget():
            raise ClientMetadataUnavailable(429, "client_metadata_budget")
        self.fetches += 1
        try:
            fetched = await self.client.get(self.fetch_from.get(client_id, client_id))
            client = check_document(fetched.body, fetched.media_type, client_id)
        except FetchFailed:
            self._failed(client_id)
            raise ClientMetadataUnavailable(503, "client_metadata_unavailable") from None
        except MetadataRefused as refused:
            self._failed(client_id)
            rule = "client_metadata_" + str(refused).replace("-", "_")
            raise ClientMetadataUnavailable(400, rule) from None
        self._failed_at.pop(client_id, None)
        self._keep(client_id, self.clock() + cache_seconds(fetched.cache_control), client)
        return client

    def _failed(self, client_id: str) -> None:
        if len(self._failed_at) >= MAX_CACHED:
            self._failed_at.clear()  # holds are only a courtesy to the document's host
        self._failed_at[client_id] = self.clock()

    def _keep(self, client_id: str, until: float, client: MetadataClient) -> None:
        if until <= self.clock():
            return
        if len(self._cached) >= MAX_CACHED:
            oldest = min(self._cached, key=lambda url: self._cached[url][0])
            del self._cached[oldest]
        self._cached[client_id] = (until, client)

    async def aclose(self) -> None:
        """Close the HTTP session."""
        await self.client.aclose()
