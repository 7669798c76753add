"""Client metadata documents: the rules (ChatGPT's pin among them), and the resolver against a
real document server on loopback TLS.

For ChatGPT's URL the resolver is told to fetch from the local server instead of chatgpt.com (the
only change a test makes); a general client's ID is the local server's URL itself. The rules,
cache, failure hold and budget are the product's.
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
    MetadataClient,
    MetadataRefused,
    check_document,
)
from service.auth.server.metadata_resolver import (
    ClientMetadataResolver,
    ClientMetadataUnavailable,
    cache_seconds,
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


class Resolve:
    """The resolver for ChatGPT's URL, fetching from the local site, with a scripted budget."""

    def __init__(
        self, services: Services, site: JwksServer, clock: Clock, budget: list[bool]
    ) -> None:
        self.budget = budget
        self.of = ClientMetadataResolver(
            ca_file=str(services.ca_file),
            allow_private_hosts=True,
            clock=clock,
            fetch_from={CHATGPT_CLIENT_ID: site.jwks_url},
        )

    async def spend(self) -> bool:
        return self.budget.pop(0) if self.budget else True

    async def resolve(self, client_id: str = CHATGPT_CLIENT_ID) -> MetadataClient:
        return await self.of.resolve(client_id, self.spend)

    async def aclose(self) -> None:
        await self.of.aclose()


def resolver(services: Services, site: JwksServer, clock: Clock, budget: list[bool]) -> Resolve:
    return Resolve(services, site, clock, budget)


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
        with pytest.raises(ClientMetadataUnavailable) as unavailable:
            await resolve.resolve()
        assert (1, "client_metadata_unavailable") == (site.fetches, unavailable.value.rule)
    finally:
        await resolve.aclose()


NATIVE = "http://127.0.0.1/callback"


def general(url: str, **changes: Any) -> bytes:
    body = {
        "client_id": url,
        "client_name": "Editor",
        "redirect_uris": [NATIVE, "cursor://anysphere.cursor-retrieval/oauth/callback"],
        "token_endpoint_auth_method": "none",
        **changes,
    }
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


URL = "https://tools.example.com/oauth/client.json"


def test_a_general_document_binds_its_name_and_native_callbacks() -> None:
    client = check_document(general(URL), "application/json", URL)
    assert (URL, "Editor", "tools.example.com") == (
        client.client_id,
        client.client_name,
        client.host,
    )
    assert (NATIVE, "cursor://anysphere.cursor-retrieval/oauth/callback") == client.redirect_uris


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (general("https://tools.example.com/other.json"), "identity"),
        (general(URL, client_name=""), "identity"),
        (general(URL, client_name=None), "missing-member"),
        (general(URL, token_endpoint_auth_method=None), "auth-method"),
        (general(URL, token_endpoint_auth_method="client_secret_post"), "auth-method"),
        (general(URL, client_secret="s"), "client-secret"),
        (general(URL, redirect_uris=["http://evil.example/cb"]), "redirect-uri-rule"),
        (general(URL, redirect_uris=["javascript:alert(1)"]), "redirect-uri-rule"),
        (
            general(URL, redirect_uris=["http://127.0.0.1:1/cb", "http://127.0.0.1:2/cb"]),
            "redirect-uris-repeated",
        ),
        (general(URL, redirect_uris=[NATIVE] * 9), "redirect-uris"),
        (general(URL, grant_types=["implicit"]), "grant-types"),
        (general(URL, response_types=["token"]), "response-types"),
    ],
    ids=[
        "id-differs",
        "no-name",
        "name-missing",
        "no-auth-method",
        "secret-method",
        "secret",
        "http-host",
        "javascript",
        "loopback-twice",
        "too-many",
        "grant",
        "response",
    ],
)
def test_a_general_document_off_the_rules_is_refused(body: bytes, rule: str) -> None:
    with pytest.raises(MetadataRefused) as refused:
        check_document(body, "application/json", URL)
    assert rule == str(refused.value)


async def test_each_client_id_is_fetched_from_itself_and_cached_apart(
    services: Services, site: JwksServer
) -> None:
    site.document = general(site.jwks_url)
    resolve = resolver(services, site, Clock(), [])
    try:
        first = await resolve.resolve(site.jwks_url)
        again = await resolve.resolve(site.jwks_url)
        assert (first, 1) == (again, site.fetches)
        assert ("Editor", f"localhost:{site.port}") == (first.client_name, first.host)
        site.document = doc()  # served at the same URL, but it names chatgpt.com's
        assert CHATGPT == await resolve.resolve()
        assert 2 == site.fetches
    finally:
        await resolve.aclose()


async def test_a_document_naming_another_client_id_is_refused_by_rule(
    services: Services, site: JwksServer
) -> None:
    site.document = general("https://localhost/elsewhere.json")
    resolve = resolver(services, site, Clock(), [])
    try:
        with pytest.raises(ClientMetadataUnavailable) as unavailable:
            await resolve.resolve(site.jwks_url)
        assert (400, "client_metadata_identity") == (
            unavailable.value.status,
            unavailable.value.rule,
        )
    finally:
        await resolve.aclose()
