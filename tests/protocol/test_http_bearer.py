"""Bearer authentication on /mcp, over real HTTP, against a key server the test controls.

The server runs in this process (tests/support/resource_server.py) so each test can look at
what the key server saw; its IMAP traffic goes through a counting proxy, the witness that a
refused request never reaches the mailbox.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from multidict import CIMultiDict

from support.counting_proxy import CountingProxy
from support.forgeries import FORGERIES
from support.jwks_server import JwksServer, jwks_server
from support.resource_server import ResourceServer, resource_server
from support.services import Services
from support.tokens import Minter

pytestmark = pytest.mark.services
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def imap_proxy(services: Services) -> Iterator[CountingProxy]:
    with CountingProxy("127.0.0.1", services.imap_port) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def jwks(services: Services) -> AsyncIterator[JwksServer]:
    async with jwks_server(services.dir / "tls") as server:
        yield server


@pytest_asyncio.fixture
async def server(
    services: Services, jwks: JwksServer, imap_proxy: CountingProxy
) -> AsyncIterator[ResourceServer]:
    env = {**services.product_env, "IMAP_PORT": str(imap_proxy.port)}
    async with resource_server(env, jwks) as found:
        yield found


def minter_for(jwks: JwksServer, server: ResourceServer) -> Minter:
    minter = Minter(issuer=jwks.issuer, resource=server.resource)
    jwks.document = minter.jwks()
    return minter


async def post(
    server: ResourceServer,
    authorization: str | list[str] | None,
    *,
    body: object = LIST_TOOLS,
    path: str = "/mcp",
    extra: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    headers: CIMultiDict[str] = CIMultiDict({**JSON_HEADERS, "Host": server.host, **(extra or {})})
    for value in [authorization] if isinstance(authorization, str) else authorization or []:
        headers.add("Authorization", value)
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.base}{path}", data=json.dumps(body), headers=headers) as r,
    ):
        return r.status, dict(r.headers), await r.read()


def unauthorized(server: ResourceServer, error: bool, scope: str = "mail.read") -> str:
    value = f'Bearer resource_metadata="{server.metadata_url}", scope="{scope}"'
    return value + ', error="invalid_token"' if error else value


class TestExtraction:
    async def test_no_authorization_header_is_401_without_an_error_code(
        self, server: ResourceServer
    ) -> None:
        status, headers, body = await post(server, None)
        assert (401, unauthorized(server, error=False)) == (status, headers["WWW-Authenticate"])
        assert {"error": "Unauthorized"} == json.loads(body)
        assert ("no-store", "nosniff", "application/json") == (
            headers["Cache-Control"],
            headers["X-Content-Type-Options"],
            headers["Content-Type"].split(";")[0],
        )

    async def test_two_authorization_headers_are_401_without_an_error_code(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        token = minter_for(jwks, server).token()
        status, headers, _ = await post(server, [f"Bearer {token}", f"Bearer {token}"])
        assert (401, unauthorized(server, error=False)) == (status, headers["WWW-Authenticate"])

    async def test_a_query_access_token_is_refused_even_beside_a_valid_header(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        token = minter_for(jwks, server).token()
        for authorization in (f"Bearer {token}", None):
            status, headers, _ = await post(
                server, authorization, path=f"/mcp?access_token={token}"
            )
            assert (401, unauthorized(server, error=True)) == (
                status,
                headers["WWW-Authenticate"],
            )

    async def test_a_token_in_a_cookie_or_the_body_only_is_not_read(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        token = minter_for(jwks, server).token()
        cookie = await post(server, None, extra={"Cookie": f"access_token={token}"})
        in_body = await post(server, None, body={**LIST_TOOLS, "access_token": token})
        assert [401, 401] == [cookie[0], in_body[0]]
        assert 0 == jwks.fetches

    @pytest.mark.parametrize("template", ["Basic {}", "Bearer\t{}", "Bearer", "Bearer ", "{}"])
    async def test_other_schemes_and_separators_are_invalid_tokens(
        self, server: ResourceServer, jwks: JwksServer, template: str
    ) -> None:
        token = minter_for(jwks, server).token()
        status, headers, _ = await post(server, template.format(token))
        assert (401, unauthorized(server, error=True)) == (status, headers["WWW-Authenticate"])

    async def test_the_scheme_is_case_insensitive_and_spaces_may_repeat(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        token = minter_for(jwks, server).token()
        status, _, body = await post(server, f"bEaReR   {token}")
        assert 200 == status
        assert 6 == len(json.loads(body)["result"]["tools"])


class TestKeys:
    async def test_concurrent_first_requests_share_one_key_fetch(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        minter = minter_for(jwks, server)
        tokens = [minter.token(key) for key in (minter.rsa, minter.ec) for _ in range(12)]
        results = await asyncio.gather(*(post(server, f"Bearer {t}") for t in tokens))
        assert [200] * 24 == [status for status, _, _ in results]
        assert 1 == jwks.fetches
        more = await asyncio.gather(*(post(server, f"Bearer {t}") for t in tokens[:5]))
        assert ([200] * 5, 1) == ([status for status, _, _ in more], jwks.fetches)

    async def test_the_key_fetch_sends_no_credentials(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        token = minter_for(jwks, server).token()
        await post(server, f"Bearer {token}")
        [seen] = jwks.headers_seen
        names = {name.lower() for name in seen}
        assert "application/json" == seen.get("Accept")
        assert set() == names & {"authorization", "cookie", "proxy-authorization"}


class TestForgeries:
    async def test_every_forgery_is_refused_alike_and_reaches_nothing(
        self, server: ResourceServer, jwks: JwksServer, imap_proxy: CountingProxy
    ) -> None:
        minter = minter_for(jwks, server)
        before = imap_proxy.snapshot()[0]
        # CR and LF cannot travel inside a header value (HTTP clients and servers refuse them).
        sendable = [f for f in FORGERIES if not any(c in f.build(minter) for c in "\r\n")]
        assert len(FORGERIES) - 3 <= len(sendable)
        parse_time = [f for f in sendable if f.parse_time]
        answers = {}
        for forgery in parse_time:
            answers[forgery.name] = await post(server, f"Bearer {forgery.build(minter)}")
        fetches_after_parse_time = jwks.fetches
        for forgery in sendable:
            if not forgery.parse_time:
                answers[forgery.name] = await post(server, f"Bearer {forgery.build(minter)}")
        expected = (401, unauthorized(server, error=True), {"error": "Unauthorized"})
        seen = {
            name: (status, headers["WWW-Authenticate"], json.loads(body))
            for name, (status, headers, body) in answers.items()
        }
        assert {name: expected for name in seen} == seen
        assert 0 == fetches_after_parse_time  # malformed tokens never make the server fetch
        assert before == imap_proxy.snapshot()[0]


class TestScopes:
    @pytest.mark.parametrize("scope", [None, "", "mail.reader mail.send", "mail.send mail.write"])
    async def test_a_token_without_mail_read_is_403_asking_for_mail_read(
        self, server: ResourceServer, jwks: JwksServer, scope: str | None
    ) -> None:
        from support.tokens import ABSENT

        minter = minter_for(jwks, server)
        token = minter.token(claims={"scope": ABSENT if scope is None else scope})
        status, headers, body = await post(server, f"Bearer {token}")
        challenge = (
            f'Bearer resource_metadata="{server.metadata_url}", scope="mail.read", '
            'error="insufficient_scope"'
        )
        assert (403, challenge, {"error": "Forbidden"}) == (
            status,
            headers["WWW-Authenticate"],
            json.loads(body),
        )
