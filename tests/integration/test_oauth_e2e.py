"""The remote deployment end to end: `angelos serve --transport http` behind a TLS proxy,
trusting the OAuth test peer (oidc-provider), reached by the mcp SDK's own OAuth client.

Nothing here is in-process: the SDK client starts from a 401, follows the challenge to the
resource metadata, discovers the issuer, registers, authorizes with PKCE and `resource`, and
calls tools with the token; angelos fetches the issuer's keys over TLS itself.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ledger.dispatch.refusals import GENERIC_REFUSAL
from support.angelos_process import free_port, http_server
from support.oidc import (
    BrowserlessUser,
    issue_token,
    peer_from_env,
    sdk_http_client,
    sdk_oauth_provider,
)
from support.services import Services
from support.tls_proxy import tls_proxy

pytestmark = pytest.mark.services
ERAS = ["legacy", "2026-07-28"]
SUBJECTS = ("owner-a", "owner-b")


class Remote:
    """The public URL clients use, and the angelos port behind the proxy."""

    def __init__(self, public_port: int, backend_port: int, tls_dir: Path) -> None:
        self.public_port = public_port
        self.backend_port = backend_port
        self.tls_dir = tls_dir

    @property
    def url(self) -> str:
        return f"https://localhost:{self.public_port}/mcp"

    def proxy(self) -> Any:
        return tls_proxy(self.public_port, self.backend_port, self.tls_dir)


@pytest.fixture(scope="module")
def remote(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    peer = peer_from_env()
    public_port = free_port()
    env = {
        **services.product_env,
        "ANGELOS_DATA_DIR": str(tmp_path_factory.mktemp("remote")),
        "MAIL_ENABLE_SEND": "1",
        "MCP_RESOURCE_URL": f"https://localhost:{public_port}/mcp",
        "MCP_OAUTH_ISSUER": peer.issuer,
        "MCP_OAUTH_JWKS_URL": peer.jwks_url,
        "MCP_ALLOWED_SUBJECTS": ",".join(SUBJECTS),
        "MCP_OAUTH_CA_FILE": str(services.ca_file),
        "MCP_OAUTH_ALLOW_PRIVATE_HOSTS": "1",
    }
    with http_server(env, host="127.0.0.1") as base:
        backend_port = urllib.parse.urlsplit(base).port
        assert backend_port is not None
        yield Remote(public_port, backend_port, services.dir / "tls")


def token_client(remote: Remote, token: str, mode: str = "legacy") -> Client:
    http = sdk_http_client()
    http.headers["Authorization"] = f"Bearer {token}"
    return Client(streamable_http_client(remote.url, http_client=http), mode=mode)


@pytest.mark.parametrize("mode", ERAS)
async def test_the_sdk_oauth_client_goes_from_a_401_to_tool_calls(
    remote: Remote, mode: str
) -> None:
    peer = peer_from_env()
    user = BrowserlessUser("owner-a", peer)
    provider = sdk_oauth_provider(remote.url, "owner-a", user=user)
    async with remote.proxy(), sdk_http_client(provider) as http:
        client = Client(streamable_http_client(remote.url, http_client=http), mode=mode)
        async with client:
            tools = await client.list_tools()
            result = await client.call_tool("mail_query", {"action": "folders"})
    assert 6 == len(tools.tools)
    assert result.is_error is False and result.structured_content is not None
    assert "INBOX" in [f["name"] for f in result.structured_content["folders"]]
    [authorization_url] = user.authorization_urls  # one sign-in for the whole session
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)
    assert ([remote.url], ["S256"]) == (query["resource"], query["code_challenge_method"])
    assert "mail.read" in query["scope"][0].split()


async def test_another_subject_neither_sees_nor_confirms_a_preparation(
    remote: Remote, services: Services
) -> None:
    spool_before = sorted(p.name for p in services.smtp_spool.iterdir())
    tokens = {s: (await issue_token(s, remote.url))["access_token"] for s in SUBJECTS}
    message = {"to": ["binding@example.test"], "subject": "Owner binding", "text": "T"}
    async with remote.proxy():
        async with token_client(remote, tokens["owner-a"]) as owner:
            prepared = await owner.call_tool("mail_prepare", {"action": "new", "message": message})
            assert prepared.is_error is False and prepared.structured_content is not None
            preview = prepared.structured_content
            query = {"action": "send_status", "prepared_id": preview["prepared_id"]}
            mine = (await owner.call_tool("mail_query", query)).structured_content
        async with token_client(remote, tokens["owner-b"]) as other:
            theirs = (await other.call_tool("mail_query", query)).structured_content
            confirm = await other.call_tool(
                "mail_send_confirmed",
                {
                    "prepared_id": preview["prepared_id"],
                    "confirmed_digest": preview["digest"],
                    "append_sent": False,
                },
            )
        async with token_client(remote, tokens["owner-a"]) as owner:
            after = (await owner.call_tool("mail_query", query)).structured_content
    assert mine is not None and theirs is not None and after is not None
    assert ("prepared", "unavailable", "prepared") == (
        mine["status"],
        theirs["status"],
        after["status"],
    )
    refusal = json.loads(confirm.content[0].text)  # type: ignore[union-attr]
    assert (True, "operation_failed") == (confirm.is_error, refusal["error_code"])
    assert GENERIC_REFUSAL == refusal["error"]  # the same words as for an expired preparation
    assert "binding@example.test" not in json.dumps(refusal)
    assert spool_before == sorted(p.name for p in services.smtp_spool.iterdir())
