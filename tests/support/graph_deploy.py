"""A `microsoft` deployment on the Graph contract double: the token endpoint, the double, the env.

The token endpoint (login.microsoftonline.com on loopback) mints opaque access tokens that the
double accepts; the double (graph.microsoft.com on loopback) keeps its mail in the real Dovecot.
Each deployment gets a refresh token and ledger namespace of its own, so no two tests share a
token cache, a stored refresh token or a ledger.
"""

from __future__ import annotations

import contextlib
import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio

from support.graph_double import GraphDouble, graph_double
from support.services import MAILBOX_VARS, Services
from support.token_endpoint import TokenEndpoint, TokenRequest, token_endpoint

GRAPH_SCOPES = (
    "https://graph.microsoft.com/User.Read https://graph.microsoft.com/Mail.ReadWrite "
    "https://graph.microsoft.com/Mail.Send"
)
CLIENT_ID = "7d3c1f9e-2b4a-4c8d-9e6f-1a2b3c4d5e6f"
CLIENT_SECRET = "rig~graph~client~secret"


@dataclass
class GraphRig:
    """The double, the token endpoint, and how to configure angelos against them."""

    double: GraphDouble
    endpoint: TokenEndpoint
    services: Services

    def env(self, **extra: str) -> dict[str, str]:
        """An owner's microsoft configuration with every gate on and fresh identities."""
        base = {k: v for k, v in self.services.product_env.items() if k not in MAILBOX_VARS}
        return {
            **base,
            "MAIL_PROVIDER": "microsoft",
            "MAIL_USERNAME": self.double.mail,
            "MICROSOFT_CLIENT_ID": CLIENT_ID,
            "MICROSOFT_CLIENT_SECRET": CLIENT_SECRET,
            "MICROSOFT_TENANT_ID": "consumers",
            "MICROSOFT_REFRESH_TOKEN": f"M.rig-{uuid.uuid4().hex}",
            "MICROSOFT_ACCOUNT_ID": self.double.account_id,
            "MICROSOFT_TOKEN_ENCRYPTION_KEY": secrets.token_hex(32),
            "MAIL_ENABLE_WRITES": "1",
            "MAIL_ENABLE_SEND": "1",
            "MAIL_ENABLE_DELETE": "1",
            "SEND_LEDGER_NAMESPACE": f"gr{uuid.uuid4().hex[:12]}",
            **extra,
        }

    def routes(self) -> list[tuple[str, int, int]]:
        """The pinned hosts a subprocess must reach here: Graph and the token endpoint."""
        return [
            ("graph.microsoft.com", 443, self.double.port),
            ("login.microsoftonline.com", 443, self.endpoint.port),
        ]

    def requests(self, method: str, route_prefix: str) -> list[Any]:
        """The double's exchanges with this method whose path starts with `route_prefix`."""
        return [
            e
            for e in self.double.exchanges
            if e.method == method and e.route.startswith(route_prefix)
        ]


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Call one tool: (is it an error, its structured content)."""
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), result.structured_content


async def ok(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call one tool that must succeed."""
    failed, body = await call(client, tool, arguments)
    assert not failed, body
    return body


@pytest_asyncio.fixture
async def graph(services: Services) -> AsyncIterator[GraphRig]:
    """The token endpoint and the Graph double for one test."""
    async with graph_rig(services) as rig:
        yield rig


@contextlib.asynccontextmanager
async def graph_rig(services: Services) -> AsyncIterator[GraphRig]:
    """Start the token endpoint and the double; tokens minted are tokens the double accepts."""
    async with (
        token_endpoint(services.dir / "tls", services.ca_file) as endpoint,
        graph_double(services) as double,
    ):

        def mint(_request: TokenRequest) -> str:
            token = "EwB" + secrets.token_urlsafe(32)
            double.accept_token(token)
            return token

        endpoint.mint = mint
        endpoint.scope = GRAPH_SCOPES
        endpoint.returned_refresh_token = lambda: f"M.rotated-{uuid.uuid4().hex}"
        yield GraphRig(double=double, endpoint=endpoint, services=services)
