"""The whole HTTP service in first-party mode with sending on and passkey approval required,
for the approval page's tests.

    async with approval_stack(services, tmp_path) as s, s.owner_browser() as page:
        token = await s.token()
        preview = await s.prepare(token, to=["ann@example.test"])
        await s.sign_in_at(page, preview["approval_url"])

angelos's own http_service (load_config, the real ledger in the test Redis under a namespace of
its own, the real SMTP sink) is served over TLS on loopback with the test CA's localhost
certificate; the issuer is `https://localhost:<port>`. The grant behind the MCP token is made in
the OAuth store directly, as test_first_party_stack does; the owner's passkey is enrolled and
used in headless Chromium with a CDP virtual authenticator.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import secrets
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

from ledger.store.ledger_store import LedgerStore
from schemas.ledger import Event, decode_event
from service.auth.server.bootstrap import new_bootstrap_token
from service.auth.server.store import OAuthStore
from service.context import AppContext
from support.angelos_process import free_port
from support.browser import Page, browser
from support.first_party import CALLBACK, CLIENT_ID, first_party_env, served_http
from support.services import Services

STATUS = "(document.getElementById('status')?.textContent ?? '')"
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
VERIFIER = "v" * 43
CHALLENGE = (
    base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
)
REASON = re.compile(r'<p id="refusal" data-reason="([a-z_]+)">')


@dataclass
class ApprovalStack:
    port: int
    oauth: OAuthStore
    app: AppContext
    bootstrap_token: str
    tls_dir: Path
    ssl: ssl.SSLContext

    @property
    def issuer(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def ledger(self) -> LedgerStore:
        store = self.app.sending.store
        assert store is not None
        return store

    async def request(
        self, method: str, path: str, *, headers: Mapping[str, str] | None = None, data: Any = None
    ) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.ssl)) as session,
            session.request(
                method, f"{self.issuer}{path}", headers=headers, data=data, allow_redirects=False
            ) as r,
        ):
            return r.status, await r.text()

    async def token(self) -> str:
        """An access token (mail.read, mail.send) of a fresh grant of the test client."""
        gid, grant = await self.oauth.grants.create(CLIENT_ID, "Test", ("mail.read", "mail.send"))
        code = await self.oauth.grants.put_code(
            gid, grant, redirect_uri=CALLBACK, code_challenge=CHALLENGE
        )
        form = {
            "grant_type": "authorization_code", "client_id": CLIENT_ID, "code": code.reveal(),
            "code_verifier": VERIFIER, "redirect_uri": CALLBACK, "resource": f"{self.issuer}/mcp",
        }  # fmt: skip
        status, body = await self.request(
            "POST",
            "/oauth/token",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            data=urlencode(form),
        )
        assert 200 == status, body
        access: str = json.loads(body)["access_token"]
        return access

    async def call(self, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tools/call over /mcp with the bearer token; its JSON-RPC result."""
        message = {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }  # fmt: skip
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        status, text = await self.request("POST", "/mcp", headers=headers, data=json.dumps(message))
        assert 200 == status, text
        if text.startswith(("event:", "data:")):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        result: dict[str, Any] = json.loads(text)["result"]
        return result

    async def prepare(self, token: str, **message: Any) -> dict[str, Any]:
        result = await self.call(token, "mail_prepare", {"action": "new", "message": message})
        assert result["isError"] is False, result
        preview: dict[str, Any] = result["structuredContent"]
        return preview

    async def confirm(self, token: str, preview: dict[str, Any]) -> dict[str, Any]:
        arguments = {
            "prepared_id": preview["prepared_id"],
            "confirmed_digest": preview["digest"],
            "append_sent": False,
        }
        return await self.call(token, "mail_send_confirmed", arguments)

    async def events(self, pid: str) -> list[Event]:
        _, entries = await self.ledger.read(pid)
        return [decode_event(entry.e) for entry in entries]

    @contextlib.asynccontextmanager
    async def owner_browser(self) -> AsyncIterator[Page]:
        """A Chromium tab with a virtual platform authenticator that verifies its user."""
        async with browser(trust=self.tls_dir / "server.crt") as chromium:
            page = await chromium.open_page()
            await page.add_virtual_authenticator(user_verified=True)
            yield page

    async def sign_in_at(self, page: Page, url: str) -> None:
        """Open an owner page signed out: enrol the first passkey, sign in, land back on it."""
        await page.goto(url)
        await page.fill("#bootstrap-token", self.bootstrap_token)
        async with page.navigation():  # enrolled, the page reloads: now the sign-in page
            await page.click("#enrol-button")
        await settle(page, "document.getElementById('sign-in-button')")
        async with page.navigation():  # signed in, back to the page that asked
            await page.click("#sign-in-button")
        assert url == await page.current_url()

    async def fetch_page(self, page: Page, path: str) -> tuple[int, str]:
        """GET a path from inside the signed-in tab: the status and the refusal's reason."""
        status, html = await page.evaluate(
            f"fetch({json.dumps(path)}).then(async r => [r.status, await r.text()])"
        )
        found = REASON.search(html)
        return status, found.group(1) if found else ""


async def settle(page: Page, ready_js: str) -> None:
    """Wait until `ready_js` holds on the page, failing early with the page's status line."""
    found = await page.wait_for(
        f"({ready_js}) ? 'ready' : ({STATUS}).startsWith('failed') && {STATUS}"
    )
    assert "ready" == found


@contextlib.asynccontextmanager
async def approval_stack(
    services: Services, data_dir: Path, **extra: str
) -> AsyncIterator[ApprovalStack]:
    """Serve the HTTP service with sending on and ANGELOS_SEND_APPROVAL=passkey (`extra` on top)."""
    port = free_port()
    owner = f"owner-{secrets.token_hex(6)}"
    token, token_hash = new_bootstrap_token()
    namespace = f"apv{secrets.token_hex(6)}"
    env = {
        **first_party_env(services, port, owner, token_hash),
        "MAIL_ENABLE_SEND": "1",
        "SEND_LEDGER_NAMESPACE": namespace,
        "ANGELOS_SEND_APPROVAL": "passkey",
        "ANGELOS_DATA_DIR": str(data_dir),
        **extra,
    }
    async with served_http(services, port, owner, env, f"{namespace}:") as (service, oauth):
        assert service.app is not None
        yield ApprovalStack(
            port, oauth, service.app, token, services.dir / "tls", services.ssl_context()
        )
