"""fastmcp's client and its OAuth helper (pinned in fastmcp-requirements.txt, run with
tests/clients/fastmcp-venv/bin/python) against one MCP server, with the helper's defaults:
dynamic registration unless --client-id is given, and its own loopback callback server on
http://localhost:<random port>/callback. Driven by tests/protocol/test_third_party_clients.py.

    fastmcp-venv/bin/python fastmcp_client.py --url https://localhost:P/mcp [--client-id ID]

The only change to the helper: `webbrowser.open` prints the authorization URL as a step
instead of opening a browser; whoever completes consent sends the browser (or a plain GET) on
to the callback. The helper opens the browser before its callback server listens (a person
takes longer than uvicorn's start; a scripted consent on a busy machine does not), so the step
is printed only once the callback port accepts connections. Prints one JSON line per step on
stdout (as ts_client.mjs does) and exits 0 only when every step passed. The test CA comes
from SSL_CERT_FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
import time
import traceback
import webbrowser
from typing import Any

from fastmcp import Client
from fastmcp.client.auth import OAuth


def emit(step: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"step": step, **fields}) + "\n")
    sys.stdout.flush()


def announce_when_listening(auth: OAuth) -> Any:
    """A `webbrowser.open` that prints the URL once the helper's callback port accepts."""

    def wait_then_emit(url: str) -> None:
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            try:
                socket.create_connection((auth._callback_host, auth.redirect_port), 0.5).close()
                break
            except OSError:
                time.sleep(0.02)
        emit("authorize", url=url)  # past the deadline the consent fails and says so

    def record_instead_of_opening(url: str, *_args: Any, **_kwargs: Any) -> bool:
        threading.Thread(target=wait_then_emit, args=(url,), daemon=True).start()
        return True

    return record_instead_of_opening


def outcome(result: Any) -> dict[str, Any]:
    return {
        "name": "mail_query",
        "is_error": bool(result.is_error),
        "structured": result.structured_content,
    }


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--client-id")
    parser.add_argument("--tool-args", default='{"action":"capabilities"}')
    args = parser.parse_args()
    auth = OAuth(callback_timeout=30.0, client_id=args.client_id)
    webbrowser.open = announce_when_listening(auth)
    tool_args = json.loads(args.tool_args)
    async with Client(args.url, auth=auth, timeout=30) as client:
        context = auth.context
        metadata = context.oauth_metadata
        resource = context.protected_resource_metadata
        emit(
            "discover",
            authorization_server=str(metadata.issuer) if metadata else None,
            resource=str(resource.resource) if resource else None,
            registration_endpoint=(
                str(metadata.registration_endpoint)
                if metadata and metadata.registration_endpoint
                else None
            ),
        )
        client_id = context.client_info.client_id if context.client_info else None
        if args.client_id:
            emit("client", client_id=client_id, how="configured")
        else:
            emit("register", client_id=client_id)
        tokens = context.current_tokens
        assert tokens is not None
        emit(
            "token",
            token_type=tokens.token_type,
            scope=tokens.scope,
            has_refresh_token=bool(tokens.refresh_token),
        )
        listed = await client.list_tools()
        emit("tools/list", names=sorted(t.name for t in listed))
        called = await client.call_tool("mail_query", tool_args, raise_on_error=False)
        emit("tools/call", **outcome(called))
        # The access token has run out, as far as the helper knows: its next request refreshes.
        context.token_expiry_time = time.time() - 1
        again = await client.call_tool("mail_query", tool_args, raise_on_error=False)
        after = context.current_tokens
        assert after is not None
        emit(
            "refresh",
            refreshed=after.access_token != tokens.access_token,
            rotated=after.refresh_token != tokens.refresh_token,
        )
        emit("after-refresh", **outcome(again))
    emit("done")
    return 0


if __name__ == "__main__":
    try:
        code = asyncio.run(asyncio.wait_for(main(), 40))
    except Exception:  # every failure is one "error" step
        emit("error", message=traceback.format_exc()[-2000:])
        code = 1
    sys.exit(code)
