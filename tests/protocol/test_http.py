"""The MCP boundary over stateless HTTP served by aiohttp, in both protocol eras."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp import Client

from schemas.discovery import compact_bytes
from service.readiness import SEND_OFF
from support.angelos_process import ROOT, angelos_command, clean_env, free_port, http_server

FIXTURE = ROOT / "fixtures" / "tools-list.json"
ERAS = ["legacy", "2026-07-28"]
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def base_url(services: Any) -> Iterator[str]:  # sending stays off: MAIL_ENABLE_SEND is unset
    with http_server(services.product_env, "--insecure-local-owner", "tester") as base:
        yield base


async def post_rpc(base: str, method: str, params: dict[str, Any], version: str) -> dict[str, Any]:
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": version}
    if version == "2026-07-28":
        headers["Mcp-Method"] = method
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        }
        if method == "tools/call":
            headers["Mcp-Name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{base}/mcp", json=body, headers=headers) as response,
    ):
        assert 200 == response.status, await response.text()
        reply: dict[str, Any] = await response.json()
        return reply


class TestDiscoveryOnTheWire:
    @pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
    async def test_tools_array_equals_the_reviewed_fixture_byte_for_byte(
        self, base_url: str, version: str
    ) -> None:
        reply = await post_rpc(base_url, "tools/list", {}, version)
        tools = reply["result"]["tools"]
        wire = compact_bytes(tools)
        print(f"wire discovery ({version}): {len(wire)} bytes")
        assert FIXTURE.read_bytes() == wire + b"\n"

    async def test_top_level_security_schemes_mirror_the_meta_copy(self, base_url: str) -> None:
        reply = await post_rpc(base_url, "tools/list", {}, "2025-11-25")
        for tool in reply["result"]["tools"]:
            assert tool["securitySchemes"] == tool["_meta"]["securitySchemes"]


class TestClientSessions:
    @pytest.mark.parametrize("mode", ERAS)
    async def test_folders_through_mcp_client(self, base_url: str, mode: str) -> None:
        async with Client(f"{base_url}/mcp", mode=mode) as client:
            result = await client.call_tool("mail_query", {"action": "folders"})
        assert result.is_error is False and result.structured_content is not None
        names = [f["name"] for f in result.structured_content["folders"]]
        assert "INBOX" in names and "Projets/Café Été 2026" in names

    @pytest.mark.parametrize("mode", ERAS)
    async def test_application_error_text_equals_structured_content(
        self, base_url: str, mode: str
    ) -> None:
        async with Client(f"{base_url}/mcp", mode=mode) as client:
            result = await client.call_tool("mail_query", {"action": "folders", "credential": "x"})
        assert result.is_error is True and result.structured_content is not None
        assert "invalid_arguments" == result.structured_content["error_code"]
        assert json.loads(result.content[0].text) == result.structured_content


class TestHttpSurface:
    async def test_healthz_reports_configured_with_the_mailbox_labels(self, base_url: str) -> None:
        async with aiohttp.ClientSession() as session, session.get(f"{base_url}/healthz") as r:
            assert 200 == r.status
            body = await r.json()
            assert "nosniff" == r.headers["X-Content-Type-Options"]
            assert "DENY" == r.headers["X-Frame-Options"]
            assert "no-referrer" == r.headers["Referrer-Policy"]
            assert (
                "default-src 'none'; frame-ancestors 'none'" == r.headers["Content-Security-Policy"]
            )
            assert "no-store" == r.headers["Cache-Control"]
        assert {
            "service": "angelos",
            "version": body["version"],
            "configured": True,
            "mail_provider": "custom",
            "mail_auth_mode": "password",
            "sending": {"ready": False, "reason": SEND_OFF.reason, "ledger_halted": False},
        } == body

    @pytest.mark.parametrize("method", ["POST", "HEAD"])
    async def test_healthz_answers_405_to_other_methods(self, base_url: str, method: str) -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, f"{base_url}/healthz") as r,
        ):
            assert 405 == r.status

    async def test_mcp_responses_carry_the_security_headers(self, base_url: str) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base_url}/mcp", json=body, headers=headers) as r,
        ):
            assert 200 == r.status
            assert "nosniff" == r.headers["X-Content-Type-Options"]
            assert "DENY" == r.headers["X-Frame-Options"]

    async def test_a_foreign_host_header_is_refused(self, base_url: str) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {**JSON_HEADERS, "Host": "attacker.example.com"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base_url}/mcp", json=body, headers=headers) as r,
        ):
            assert 421 == r.status

    async def test_a_request_body_over_8_mib_is_refused(self, base_url: str) -> None:
        big = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "mail_query",
                "arguments": {"action": "folders", "x": "a" * (8 * 1024 * 1024)},
            },
        }
        headers = {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base_url}/mcp", data=json.dumps(big), headers=headers) as r,
        ):
            assert r.status == 413


AUTH_ENV = {
    "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
    "MCP_OAUTH_ISSUER": "https://login.example.com/",
    "MCP_OAUTH_JWKS_URL": "https://login.example.com/.well-known/jwks.json",
    "MCP_ALLOWED_SUBJECTS": "owner-123",
}


class TestStartupRules:
    def test_unconfigured_server_serves_503_and_healthz_false(self, tmp_path: Path) -> None:
        with http_server(
            {"ANGELOS_DATA_DIR": str(tmp_path)}, "--insecure-local-owner", "t"
        ) as base:
            with urllib.request.urlopen(f"{base}/healthz") as r:
                body = json.loads(r.read())
            assert body["configured"] is False and "mail_provider" not in body
            request = urllib.request.Request(f"{base}/mcp", data=b"{}", method="POST")
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request)
            assert 503 == caught.value.code
            assert b"Angelos is not configured" == caught.value.read()
            assert ("nosniff", "no-store", "DENY") == tuple(
                caught.value.headers[h]
                for h in ("X-Content-Type-Options", "Cache-Control", "X-Frame-Options")
            )

    def test_without_resource_server_settings_http_starts_and_serves_503(
        self, services: Any
    ) -> None:
        with http_server(services.product_env) as base:
            with urllib.request.urlopen(f"{base}/healthz") as r:
                body = json.loads(r.read())
            assert (False, "custom") == (body["configured"], body["mail_provider"])
            request = urllib.request.Request(f"{base}/mcp", data=b"{}", method="POST")
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request)
            assert 503 == caught.value.code

    @pytest.mark.parametrize(
        "broken",
        [
            {"MCP_RESOURCE_URL": "https://mail.example.com/api"},
            {"MCP_OAUTH_ISSUER": "https://mail.example.com/"},
            {"MCP_ALLOWED_SUBJECTS": ""},
        ],
        ids=["resource-path-not-mcp", "root-issuer-on-the-resource-host", "no-subjects"],
    )
    def test_invalid_resource_server_settings_serve_503_and_keep_the_mailbox_labels(
        self, services: Any, broken: dict[str, str]
    ) -> None:
        env = {
            **services.product_env,
            "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
            "MCP_OAUTH_ISSUER": "https://login.example.com/",
            "MCP_OAUTH_JWKS_URL": "https://login.example.com/jwks",
            "MCP_ALLOWED_SUBJECTS": "owner-123",
            **broken,
        }
        with http_server(env) as base:
            with urllib.request.urlopen(f"{base}/healthz") as r:
                body = json.loads(r.read())
            request = urllib.request.Request(f"{base}/mcp", data=b"{}", method="POST")
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request)
            with pytest.raises(urllib.error.HTTPError) as metadata:
                urllib.request.urlopen(f"{base}/.well-known/oauth-protected-resource")
        assert (False, "custom", "password") == (
            body["configured"],
            body["mail_provider"],
            body["mail_auth_mode"],
        )
        assert (503, 404) == (caught.value.code, metadata.value.code)

    def test_a_path_issuer_on_the_resource_host_is_configured(self, services: Any) -> None:
        env = {
            **services.product_env,
            "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
            "MCP_OAUTH_ISSUER": "https://mail.example.com/realms/owner",
            "MCP_OAUTH_JWKS_URL": "https://mail.example.com/realms/owner/certs",
            "MCP_ALLOWED_SUBJECTS": "owner-123",
        }
        with http_server(env) as base, urllib.request.urlopen(f"{base}/healthz") as r:
            assert json.loads(r.read())["configured"] is True

    @pytest.mark.parametrize(
        ("extra", "status"),
        [
            ({}, 0),
            (AUTH_ENV, 0),
            ({**AUTH_ENV, "MCP_ALLOWED_SUBJECTS": "a,\x01b"}, 1),
            ({"MCP_OAUTH_INITIAL_SCOPES": "mail.read"}, 1),
        ],
        ids=["no-resource-server", "valid", "bad-subjects", "group-half-set"],
    )
    def test_check_config_fails_on_resource_server_problems(
        self, services: Any, extra: dict[str, str], status: int
    ) -> None:
        proc = subprocess.run(
            angelos_command("check-config"),
            env=clean_env({**services.product_env, **extra}),
            cwd=ROOT,
            capture_output=True,
            timeout=30,
        )
        assert status == proc.returncode
        problems = [line for line in proc.stdout.decode().splitlines() if line.startswith("  - ")]
        assert (status == 1) == any(line.startswith("  - MCP_") for line in problems)
        assert (status == 0) == (problems == [])

    def test_insecure_mode_refuses_a_non_loopback_address(self) -> None:
        proc = subprocess.run(
            angelos_command(
                "serve",
                "--transport",
                "http",
                "--host",
                "0.0.0.0",
                "--port",
                str(free_port()),
                "--insecure-local-owner",
                "x",
            ),
            env=clean_env({}),
            cwd=ROOT,
            capture_output=True,
            timeout=30,
        )
        assert 2 == proc.returncode
        assert b"loopback" in proc.stderr


class TestResourceMetadata:
    @pytest.mark.parametrize("path", ["", "/mcp"])
    async def test_document_names_resource_issuer_and_scopes(
        self, services: Any, path: str
    ) -> None:
        env = {**services.product_env, **AUTH_ENV}
        with http_server(env, "--insecure-local-owner", "t") as base:
            url = f"{base}/.well-known/oauth-protected-resource{path}"
            headers = {"Host": "attacker.example.com", "X-Forwarded-Host": "attacker.example.com"}
            async with aiohttp.ClientSession() as session:
                async with session.get(url, headers=headers) as r:
                    assert 200 == r.status
                    assert "public, max-age=300" == r.headers["Cache-Control"]
                    assert {
                        "resource": "https://mail.example.com/mcp",
                        "authorization_servers": ["https://login.example.com/"],
                        "scopes_supported": ["mail.read", "mail.write", "mail.send"],
                        "bearer_methods_supported": ["header"],
                    } == await r.json()
                async with session.head(url) as r:
                    assert 200 == r.status and b"" == await r.read()
                async with session.post(url) as r:
                    assert 405 == r.status and "GET, HEAD" == r.headers["Allow"]

    async def test_without_resource_settings_there_is_no_document(self, base_url: str) -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base_url}/.well-known/oauth-protected-resource") as r,
        ):
            assert 404 == r.status
