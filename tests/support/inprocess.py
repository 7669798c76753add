"""An in-process MCP client on a freshly built server: the real protocol without a subprocess."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import msgspec
from mcp import Client

from service.app import build_app
from service.config import load_config
from service.context import AppContext
from service.mcp_server import build_server
from service.principal import local_principal

ALL_SCOPES = ("mail.read", "mail.write", "mail.send")


@contextlib.asynccontextmanager
async def mcp_client(
    env: Mapping[str, str],
    scopes: Iterable[str] = ALL_SCOPES,
    owner: str = "tester",
    grant: str | None = None,
    **client_options: Any,
) -> AsyncIterator[tuple[Client, AppContext]]:
    """Yield a connected client and the server's application context; close both after.

    `grant` stands in for a first-party token's grant binding on the caller's principal;
    `client_options` go to the SDK's Client (its `mode`, an `elicitation_callback`).
    """
    config = load_config(env)
    assert config.mail is not None, config.problems
    app = build_app(config)
    await app.start()
    principal = msgspec.structs.replace(local_principal(owner, tuple(scopes)), grant=grant)
    server = build_server(app, lambda ctx: principal)
    try:
        async with Client(server, **client_options) as client:
            yield client, app
    finally:
        await app.aclose()
