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
from support.forgeries import FORGERIES, MAX_TOKEN_BYTES
from support.jwks_server import JwksServer, jwks_server
from support.resource_server import ResourceServer, resource_server
from support.services import Services
from support.silent import silent_listener
from support.tokens import ABSENT, Minter, sized_token

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
        self,
        server: ResourceServer,
        jwks: JwksServer,
        imap_proxy: CountingProxy,
        capsys: pytest.CaptureFixture[str],
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
        logged = capsys.readouterr().out
        assert len(sendable) <= logged.count("bearer_refused")
        parts = {f.name: _secret_part(f.build(minter)) for f in sendable}
        leaked = [name for name, part in parts.items() if len(part) == 24 and part in logged]
        assert [] == leaked


def _secret_part(token: str) -> str:
    """A piece of the token that only a leak of the token itself would put in a log."""
    longest = max(token.split("."), key=len)
    return longest[len(longest) // 2 : len(longest) // 2 + 24]


class TestScopes:
    @pytest.mark.parametrize("scope", [None, "", "mail.reader mail.send", "mail.send mail.write"])
    async def test_a_token_without_mail_read_is_403_asking_for_mail_read(
        self, server: ResourceServer, jwks: JwksServer, scope: str | None
    ) -> None:
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


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


class TestRequests:
    async def test_a_token_of_the_maximum_size_is_accepted(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        token = sized_token(minter_for(jwks, server), MAX_TOKEN_BYTES)
        assert MAX_TOKEN_BYTES == len(token)
        status, _, body = await post(server, f"Bearer {token}")
        assert (200, 6) == (status, len(json.loads(body)["result"]["tools"]))

    async def test_a_body_over_8_mib_with_a_valid_token_never_reaches_a_tool(
        self, server: ResourceServer, jwks: JwksServer, imap_proxy: CountingProxy
    ) -> None:
        token = minter_for(jwks, server).token()
        before = imap_proxy.snapshot()[0]
        big = tool_call("mail_query", {"action": "search", "folder": "x" * (8 * 1024 * 1024)})
        status, _, _ = await post(server, f"Bearer {token}", body=big)
        assert (413, before) == (status, imap_proxy.snapshot()[0])

    async def test_an_unauthenticated_get_is_401_before_the_method_is_looked_at(
        self, server: ResourceServer
    ) -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{server.base}/mcp", headers={"Host": server.host}) as r,
        ):
            assert 401 == r.status

    async def test_a_foreign_host_or_origin_is_refused_even_with_a_valid_token(
        self, server: ResourceServer, jwks: JwksServer
    ) -> None:
        token = f"Bearer {minter_for(jwks, server).token()}"
        foreign_host = await post(server, token, extra={"Host": "attacker.example.com"})
        foreign_origin = await post(server, token, extra={"Origin": "https://attacker.example"})
        plain_origin = await post(server, token, extra={"Origin": f"http://{server.host}"})
        own_origin = await post(server, token, extra={"Origin": f"https://{server.host}"})
        assert [421, 403, 403, 200] == [
            foreign_host[0],
            foreign_origin[0],
            plain_origin[0],
            own_origin[0],
        ]


class TestUnreachableIssuer:
    async def test_a_silent_issuer_fails_closed_and_the_server_keeps_answering(
        self, services: Services, jwks: JwksServer
    ) -> None:
        with silent_listener() as port:
            silent = JwksServer(port=port)
            async with resource_server(services.product_env, silent) as server:
                token = Minter(issuer=silent.issuer, resource=server.resource).token()
                waiting = asyncio.create_task(post(server, f"Bearer {token}"))
                await asyncio.sleep(0.5)
                started = asyncio.get_running_loop().time()
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"{server.base}/healthz") as health,
                ):
                    assert 200 == health.status
                health_s = asyncio.get_running_loop().time() - started
                status, headers, _ = await waiting
        assert (401, unauthorized(server, error=True)) == (status, headers["WWW-Authenticate"])
        assert health_s < 1.0  # the key fetch waits on the network, never on the event loop


class TestStepUp:
    async def test_a_write_without_mail_write_carries_a_step_up_challenge(
        self, services: Services, jwks: JwksServer
    ) -> None:
        env = {**services.product_env, "MAIL_ENABLE_WRITES": "1"}
        async with resource_server(env, jwks) as server:
            token = minter_for(jwks, server).token(claims={"scope": "mail.read"})
            call = tool_call("mail_create", {"action": "folder", "name": "StepUp-never"})
            status, _, body = await post(server, f"Bearer {token}", body=call)
        result = json.loads(body)["result"]
        assert (200, True) == (status, result["isError"])
        assert ("insufficient_scope", "mail.write") == (
            result["structuredContent"]["error_code"],
            result["structuredContent"]["required_scope"],
        )
        expected = (
            f'Bearer resource_metadata="{server.metadata_url}", scope="mail.read mail.write", '
            'error="insufficient_scope", '
            'error_description="Additional mailbox permission requires owner consent"'
        )
        assert [expected] == result["_meta"]["mcp/www_authenticate"]

    async def test_a_sent_copy_without_mail_write_asks_for_all_three_scopes(
        self, services: Services, jwks: JwksServer
    ) -> None:
        env = {**services.product_env, "MAIL_ENABLE_WRITES": "1", "MAIL_ENABLE_SEND": "1"}
        async with resource_server(env, jwks) as server:
            token = minter_for(jwks, server).token(claims={"scope": "mail.read mail.send"})
            message = {"to": ["stepup@example.test"], "subject": "S", "text": "T"}
            prepare = tool_call("mail_prepare", {"action": "new", "message": message})
            _, _, prepared = await post(server, f"Bearer {token}", body=prepare)
            preview = json.loads(prepared)["result"]["structuredContent"]
            call = tool_call(
                "mail_send_confirmed",
                {
                    "prepared_id": preview["prepared_id"],
                    "confirmed_digest": preview["digest"],
                    "append_sent": True,
                },
            )
            _, _, body = await post(server, f"Bearer {token}", body=call)
        result = json.loads(body)["result"]
        assert ["mail.read", "mail.write", "mail.send"] == result["structuredContent"][
            "required_scopes"
        ]
        [challenge] = result["_meta"]["mcp/www_authenticate"]
        assert challenge.startswith(
            f'Bearer resource_metadata="{server.metadata_url}", '
            'scope="mail.read mail.write mail.send", error="insufficient_scope"'
        )
        assert "no message was sent" in challenge


class TestInitialScopes:
    @pytest.mark.parametrize(
        ("writes", "send", "expected"),
        [
            ("1", "1", "mail.read mail.write mail.send"),
            ("0", "1", "mail.read mail.send"),
            ("true", "yes", "mail.read"),
        ],
    )
    async def test_the_401_asks_for_the_initial_scopes_the_gates_allow(
        self, services: Services, jwks: JwksServer, writes: str, send: str, expected: str
    ) -> None:
        extra = {
            "MCP_OAUTH_INITIAL_SCOPES": "mail.send mail.read mail.write",
            "MAIL_ENABLE_WRITES": writes,
            "MAIL_ENABLE_SEND": send,
        }
        async with resource_server(services.product_env, jwks, extra=extra) as server:
            status, headers, _ = await post(server, None)
            minter = minter_for(jwks, server)
            forbidden = await post(server, f"Bearer {minter.token(claims={'scope': 'x'})}")
        assert (401, unauthorized(server, error=False, scope=expected)) == (
            status,
            headers["WWW-Authenticate"],
        )
        assert 'scope="mail.read", error="insufficient_scope"' in forbidden[1]["WWW-Authenticate"]


class TestMetadata:
    @pytest.mark.parametrize("path", ["", "/mcp"])
    async def test_head_is_empty_post_is_405_and_neither_fetches_keys(
        self, server: ResourceServer, jwks: JwksServer, path: str
    ) -> None:
        url = f"{server.base}/.well-known/oauth-protected-resource{path}"
        async with aiohttp.ClientSession() as session:
            async with session.head(url) as head:
                assert (200, b"") == (head.status, await head.read())
                assert "public, max-age=300" == head.headers["Cache-Control"]
            async with session.post(url) as posted:
                assert (405, "GET, HEAD") == (posted.status, posted.headers["Allow"])
            async with session.get(url, headers={"X-Forwarded-Host": "a.example"}) as got:
                document = await got.json()
        assert (server.resource, [jwks.issuer]) == (
            document["resource"],
            document["authorization_servers"],
        )
        assert 0 == jwks.fetches
