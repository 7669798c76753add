"""ChatGPT's pinned client metadata: the document rules, and the resolver against a real server.

The resolver is pointed at a document server on loopback TLS instead of chatgpt.com (the only
change a test makes); its rules, cache, failure hold and budget are the product's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from service.auth.server.client_metadata import (
    CHATGPT,
    CHATGPT_CALLBACK,
    ClientMetadataResolver,
    ClientMetadataUnavailable,
    MetadataRefused,
    cache_seconds,
    check_document,
)
from service.config import CHATGPT_CLIENT_ID
from support.jwks_server import JwksServer, jwks_server
from support.services import Services

pytestmark = pytest.mark.services
GOOD: dict[str, Any] = {
    "client_id": CHATGPT_CLIENT_ID,
    "client_name": "ChatGPT",
    "redirect_uris": [CHATGPT_CALLBACK],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_methods_supported": ["none"],
}


def doc(**changes: Any) -> bytes:
    body = {**GOOD, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def test_the_pinned_document_is_accepted() -> None:
    assert CHATGPT == check_document(doc(), "application/json")


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (doc(client_name="Other"), "identity"),
        (doc(client_id="https://chatgpt.com/other.json"), "identity"),
        (doc(redirect_uris=[CHATGPT_CALLBACK, "https://evil.example/cb"]), "redirect-uris"),
        (doc(redirect_uris=[]), "redirect-uris"),
        (doc(grant_types=["authorization_code"]), "grant-types"),
        (doc(response_types=["token"]), "response-types"),
        (doc(token_endpoint_auth_methods_supported=["client_secret_basic"]), "auth-method"),
        (doc(token_endpoint_auth_methods_supported=None), "auth-method"),
        (doc(response_types=None), "missing-member"),
        (doc()[:-1] + b', "CLIENT_ID": "x"}', "case-fold-duplicate-member"),
        (doc() + b" trailing", "trailing-data"),
    ],
)
def test_documents_off_the_pinned_identity_are_refused(body: bytes, rule: str) -> None:
    with pytest.raises(MetadataRefused) as refused:
        check_document(body, "application/json")
    assert rule == str(refused.value)


def test_the_singular_auth_method_serves_when_the_list_is_absent() -> None:
    body = doc(token_endpoint_auth_methods_supported=None, token_endpoint_auth_method="none")
    assert CHATGPT == check_document(body, "application/json")


def test_another_media_type_is_refused() -> None:
    with pytest.raises(MetadataRefused):
        check_document(doc(), "text/html")


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("", 300), ("max-age=60", 60), ("public, max-age=900", 300), ("no-store", 0), ("no-cache", 0)],
)
def test_the_cache_lifetime(header: str, seconds: int) -> None:
    assert seconds == cache_seconds(header)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def site(services: Services) -> AsyncIterator[JwksServer]:
    async with jwks_server(services.dir / "tls") as server:
        server.document = doc()
        yield server


def resolver(
    services: Services, site: JwksServer, clock: Clock, budget: list[bool]
) -> ClientMetadataResolver:
    async def spend() -> bool:
        return budget.pop(0) if budget else True

    return ClientMetadataResolver(
        spend,
        url=site.jwks_url,
        ca_file=str(services.ca_file),
        allow_private_hosts=True,
        clock=clock,
    )


async def test_metadata_is_fetched_once_and_cached_for_its_lifetime(
    services: Services, site: JwksServer
) -> None:
    clock = Clock()
    resolve = resolver(services, site, clock, [])
    try:
        assert [CHATGPT, CHATGPT] == [await resolve.resolve(), await resolve.resolve()]
        assert 1 == site.fetches
        clock.now += 301
        await resolve.resolve()
        assert 2 == site.fetches
    finally:
        await resolve.aclose()


async def test_a_failed_fetch_holds_five_seconds_and_never_revives_old_metadata(
    services: Services, site: JwksServer
) -> None:
    clock = Clock()
    site.cache_control = "max-age=10"
    resolve = resolver(services, site, clock, [])
    try:
        await resolve.resolve()
        clock.now += 11
        site.status = 503
        for _ in range(3):
            with pytest.raises(ClientMetadataUnavailable):
                await resolve.resolve()
        assert 2 == site.fetches  # the hold kept the next two from fetching
        site.status = 200
        clock.now += 5
        assert CHATGPT == await resolve.resolve()
    finally:
        await resolve.aclose()


async def test_a_spent_budget_is_429_without_a_fetch(services: Services, site: JwksServer) -> None:
    resolve = resolver(services, site, Clock(), [False])
    try:
        with pytest.raises(ClientMetadataUnavailable) as unavailable:
            await resolve.resolve()
        assert (429, 0) == (unavailable.value.status, site.fetches)
    finally:
        await resolve.aclose()


async def test_a_redirect_is_refused(services: Services, site: JwksServer) -> None:
    site.redirect_to = site.jwks_url
    resolve = resolver(services, site, Clock(), [])
    try:
        with pytest.raises(ClientMetadataUnavailable):
            await resolve.resolve()
        assert 1 == site.fetches
    finally:
        await resolve.aclose()
