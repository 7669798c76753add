"""HTTP hygiene on the wire: DNS-rebinding checks for every loopback bind, security headers,
405 for GET, short JSON-RPC errors for batches and unknown protocol versions.

The rows of docs/acceptance/auth-config.md's response-header section each name their test here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from support.angelos_process import http_server
from support.raw_http import JSON_HEADERS, RawResponse, exchange, request_bytes

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


class Bind(NamedTuple):
    """A server bound to one loopback spelling, and the Host values that name it."""

    address: str  # where the client connects
    port: int
    own_hosts: tuple[str, ...]  # without the port


BINDS = {
    "127.0.0.1": ("127.0.0.1", "localhost", "LocalHost"),
    "127.0.0.2": ("127.0.0.2", "localhost"),
    "127.1.2.3": ("127.1.2.3", "localhost"),
    "localhost": ("localhost", "127.0.0.1", "[::1]"),
    "::1": ("[::1]", "[0:0:0:0:0:0:0:1]", "localhost"),
    "0:0:0:0:0:0:0:1": ("[::1]", "[0000:0000:0000:0000:0000:0000:0000:0001]", "localhost"),
}


@pytest.fixture(scope="module", params=sorted(BINDS))
def bound(request: pytest.FixtureRequest, services: Any) -> Iterator[Bind]:
    spelling: str = request.param
    with http_server(
        services.product_env, "--insecure-local-owner", "hygiene", host=spelling
    ) as base:
        address, port = base.removeprefix("http://").rsplit(":", 1)
        yield Bind(address, int(port), BINDS[spelling])


async def post(
    bind: Bind, host: str, *extra: tuple[str, str], body: bytes = PING, path: str = "/mcp"
) -> RawResponse:
    headers = [("Host", host), *JSON_HEADERS, *extra]
    return await exchange(bind.address, bind.port, request_bytes("POST", path, headers, body))


def foreign_hosts(bind: Bind) -> list[str]:
    own = bind.own_hosts[0]
    p = bind.port
    return [
        "evil.example.com",
        f"evil.example.com:{p}",
        f"localhost.evil.example.com:{p}",
        f"user@localhost:{p}",
        own,  # no port: port 80
        f"{own}:{p + 1}",
        f"localhost:{p + 1}",
        f"127.0.0.99:{p}",
        f"127.1:{p}",
        f"[::2]:{p}",
        "",
    ]


class TestDnsRebinding:
    async def test_every_host_naming_this_server_with_its_port_is_served(self, bound: Bind) -> None:
        hosts = [f"{h}:{bound.port}" for h in bound.own_hosts]
        answers = [await post(bound, h) for h in hosts]
        assert [(200, {"jsonrpc": "2.0", "id": 1, "result": {}})] * len(hosts) == [
            (a.status, json.loads(a.body)) for a in answers
        ]

    async def test_a_foreign_host_gets_421_before_the_body_is_read(self, bound: Bind) -> None:
        hosts = foreign_hosts(bound)
        answers = {h: await post(bound, h, body=b"{not json") for h in hosts}
        assert {h: 421 for h in hosts} == {h: a.status for h, a in answers.items()}
        assert all(-32600 == json.loads(a.body)["error"]["code"] for a in answers.values())

    async def test_a_host_that_is_no_valid_authority_is_400_invalid_host(self, bound: Bind) -> None:
        p = bound.port
        hosts = [f"{bound.own_hosts[0]}:{p}.evil.example.com", f"::1:{p}", "localhost:99999"]
        cases = [(h, path) for h in hosts for path in ("/mcp", "/healthz")]
        answers = {case: await post(bound, case[0], path=case[1]) for case in cases}
        assert {case: (400, b"invalid host") for case in cases} == {
            case: (a.status, a.body) for case, a in answers.items()
        }

    async def test_a_loopback_address_this_server_is_not_bound_to_gets_421(
        self, bound: Bind
    ) -> None:
        # An IPv4 bind does not answer to [::1], an IPv6 bind not to 127.0.0.1; localhost
        # binds both, so it gets another IPv4 loopback address.
        own = set(bound.own_hosts)
        unbound = next(h for h in ("[::1]", "127.0.0.1", "127.0.0.2") if h not in own)
        assert 421 == (await post(bound, f"{unbound}:{bound.port}")).status

    async def test_no_origin_or_this_servers_own_origin_is_served(self, bound: Bind) -> None:
        host = f"{bound.own_hosts[0]}:{bound.port}"
        origins = [f"http://{h}:{bound.port}" for h in bound.own_hosts]
        answers = [await post(bound, host, ("Origin", o)) for o in origins]
        answers.append(await post(bound, host))
        assert [200] * len(answers) == [a.status for a in answers]

    async def test_a_foreign_origin_gets_403(self, bound: Bind) -> None:
        host = f"{bound.own_hosts[0]}:{bound.port}"
        origins = [
            "http://evil.example.com",
            f"http://evil.example.com:{bound.port}",
            "null",
            f"https://{host}",
            f"http://{bound.own_hosts[0]}:{bound.port + 1}",
            f"http://{bound.own_hosts[0]}",
            f"http://{host}/",
        ]
        answers = {o: await post(bound, host, ("Origin", o)) for o in origins}
        assert {o: 403 for o in origins} == {o: a.status for o, a in answers.items()}

    async def test_a_foreign_host_is_421_whatever_the_origin(self, bound: Bind) -> None:
        origin = ("Origin", "http://evil.example.com")
        assert 421 == (await post(bound, "evil.example.com", origin)).status


@pytest.fixture(scope="module")
def local(services: Any) -> Iterator[Bind]:
    with http_server(services.product_env, "--insecure-local-owner", "hygiene") as base:
        yield Bind("127.0.0.1", int(base.rsplit(":", 1)[1]), ("127.0.0.1",))


def own_host(bind: Bind) -> str:
    return f"127.0.0.1:{bind.port}"


class TestSecurityHeaders:
    async def test_every_kind_of_response_carries_the_five_headers(self, local: Bind) -> None:
        async def send(
            method: str, path: str, body: bytes = b"", host: str = own_host(local), **extra: str
        ) -> RawResponse:
            headers = [("Host", host), *JSON_HEADERS, *extra.items()]
            return await exchange(
                local.address, local.port, request_bytes(method, path, headers, body)
            )

        responses = {
            200: await send("POST", "/mcp", PING),
            400: await send("POST", "/mcp", b"[]"),
            403: await send("POST", "/mcp", PING, Origin="http://evil.example.com"),
            404: await send("GET", "/nowhere"),
            405: await send("GET", "/mcp"),
            413: await send("POST", "/mcp", b" " * (8 * 1024 * 1024 + 1)),
            421: await send("POST", "/mcp", PING, host="evil.example.com"),
            -405: await send("POST", "/healthz"),
            -200: await send("GET", "/healthz"),
        }
        assert {status: abs(status) for status in responses} == {
            status: r.status for status, r in responses.items()
        }
        missing = {
            status: {k: v for k, v in SECURITY_HEADERS.items() if r.headers.get(k) != v}
            for status, r in responses.items()
        }
        assert {status: {} for status in responses} == missing

    @pytest.mark.parametrize("host", ["127.0.0.1\rX", "127.0.0.1\nX", "127.0.0.1\r\n X"])
    async def test_cr_or_lf_in_host_is_400(self, local: Bind, host: str) -> None:
        raw = request_bytes("GET", "/healthz", [("Host", host)])
        assert 400 == (await exchange(local.address, local.port, raw)).status


class TestMcpMethods:
    @pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "OPTIONS", "HEAD"])
    async def test_methods_other_than_post_are_405_with_allow_post(
        self, local: Bind, method: str
    ) -> None:
        headers = [("Host", own_host(local)), ("Accept", "text/event-stream, application/json")]
        answer = await exchange(local.address, local.port, request_bytes(method, "/mcp", headers))
        assert (405, "POST", b"") == (answer.status, answer.headers.get("allow"), answer.body)


class TestShortErrors:
    async def test_a_batch_is_one_short_32600(self, local: Bind) -> None:
        batch = b"[" + PING + b"," + PING.replace(b'"id":1', b'"id":2') + b"]"
        answer = await post(local, own_host(local), body=batch)
        assert 400 == answer.status
        assert {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid Request: batches are not supported"},
        } == json.loads(answer.body)

    @pytest.mark.parametrize("version", ["1999-01-01", "2025-13-01", "v999.0.0"])
    async def test_an_unknown_protocol_version_header_is_unsupported_protocol_version(
        self, local: Bind, version: str
    ) -> None:
        answer = await post(local, own_host(local), ("MCP-Protocol-Version", version))
        assert 400 == answer.status
        assert {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": version},
            },
        } == json.loads(answer.body)

    @pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
    async def test_every_handshake_version_header_is_served(
        self, local: Bind, version: str
    ) -> None:
        answer = await post(local, own_host(local), ("MCP-Protocol-Version", version))
        assert (200, {"jsonrpc": "2.0", "id": 1, "result": {}}) == (
            answer.status,
            json.loads(answer.body),
        )
