"""One browser tab over a flat DevTools session: navigate, script, click, type, WebAuthn."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec

from support.cdp import BrowserError, Connection

LOAD_TIMEOUT = 30.0  # seconds for a navigation to reach its load event


class Cookie(msgspec.Struct, rename="camel", frozen=True):
    """A cookie the browser holds for the page's URL."""

    name: str
    value: str
    domain: str
    path: str
    expires: float  # seconds since the epoch; -1 for a session cookie
    http_only: bool
    secure: bool
    same_site: str | None = None  # absent when the server set none


class Credential(msgspec.Struct, rename="camel", frozen=True):
    """A credential held by a virtual authenticator."""

    credential_id: bytes
    is_resident_credential: bool
    private_key: bytes  # PKCS#8 DER
    sign_count: int
    rp_id: str | None = None
    user_handle: bytes | None = None


def _selector_js(selector: str, body: str) -> str:
    """An expression running `body` with `el` bound to the element, or null when none matches."""
    return (
        f"(() => {{ const el = document.querySelector({json.dumps(selector)}); "
        f"if (!el) return null; {body} }})()"
    )


class Page:
    """A tab; every method runs in the page's own DevTools session."""

    def __init__(self, connection: Connection, session: str) -> None:
        self._connection = connection
        self._session = session
        self._authenticator: str | None = None
        self.log: deque[str] = deque(maxlen=50)  # recent console messages and page errors
        self._answering: set[asyncio.Task[dict[str, Any]]] = set()

    async def start(self) -> None:
        """Enable the domains the methods rely on and start collecting the page's log."""
        self._connection.listen("Runtime.consoleAPICalled", self._console, session=self._session)
        self._connection.listen("Runtime.exceptionThrown", self._exception, session=self._session)
        await self._send("Page.enable")
        await self._send("Runtime.enable")

    @contextlib.asynccontextmanager
    async def navigation(self) -> AsyncIterator[None]:
        """Wait, on leaving the block, for the load event of the page the block navigated to."""
        loaded = self._connection.expect("Page.loadEventFired", session=self._session)
        try:
            yield
            try:
                async with asyncio.timeout(LOAD_TIMEOUT):
                    await loaded
            except TimeoutError:
                raise BrowserError(f"no page finished loading within {LOAD_TIMEOUT} s") from None
        finally:
            loaded.cancel()

    async def goto(self, url: str) -> None:
        """Navigate to `url` and wait for its load event; a failed navigation raises."""
        async with self.navigation():
            result = await self._send("Page.navigate", {"url": url})
            if result.get("errorText"):
                raise BrowserError(f"navigation to {url} failed: {result['errorText']}")

    async def evaluate(self, js: str) -> Any:
        """The value of a JavaScript expression (awaited if it is a promise), as JSON data."""
        result = await self._send(
            "Runtime.evaluate", {"expression": js, "awaitPromise": True, "returnByValue": True}
        )
        details = result.get("exceptionDetails")
        if details is not None:
            exception = details.get("exception", {})
            raise BrowserError(f"script failed: {exception.get('description') or details['text']}")
        return result["result"].get("value")

    # The error names the predicate and the page's log, which a caller's asyncio.timeout could not.
    async def wait_for(self, js_predicate: str, timeout: float = 10.0) -> Any:  # noqa: ASYNC109
        """Poll a JavaScript expression until it is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(js_predicate)
            if value:
                return value
            if time.monotonic() > deadline:
                recent = "\n".join(self.log) or "(nothing logged)"
                raise BrowserError(
                    f"still false after {timeout} s: {js_predicate}\npage log:\n{recent}"
                )
            await asyncio.sleep(0.05)

    async def click(self, selector: str) -> None:
        """Click the middle of the first element matching `selector` as a user would."""
        centre = await self.evaluate(
            _selector_js(
                selector,
                "el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect(); "
                "return [r.left + r.width / 2, r.top + r.height / 2];",
            )
        )
        if centre is None:
            raise BrowserError(f"no element matches {selector!r}")
        x, y = centre
        for kind in ("mousePressed", "mouseReleased"):
            await self._send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    async def fill(self, selector: str, value: str) -> None:
        """Replace the text of the input matching `selector` by typing `value` into it."""
        found = await self.evaluate(_selector_js(selector, "el.focus(); el.select(); return true;"))
        if found is None:
            raise BrowserError(f"no element matches {selector!r}")
        await self._send("Input.insertText", {"text": value})
        typed = await self.evaluate(_selector_js(selector, "return el.value;"))
        if typed != value:
            raise BrowserError(f"{selector!r} holds {typed!r} after typing, not the value given")

    async def current_url(self) -> str:
        """The URL of the document shown now."""
        url: str = await self.evaluate("location.href")
        return url

    async def cookies(self) -> list[Cookie]:
        """The cookies the browser would send to the page's current URL."""
        result = await self._send("Network.getCookies")
        return msgspec.convert(result["cookies"], list[Cookie])

    async def answer_locally(self, url_pattern: str, html: str) -> list[str]:
        """Answer every request matching `url_pattern` (a Fetch pattern, `*` wildcards) with
        `html` from the browser itself, before any name resolution or connection; return the
        list the intercepted URLs are appended to, in order."""
        seen: list[str] = []
        body = base64.b64encode(html.encode()).decode("ascii")

        def paused(params: dict[str, Any]) -> None:
            seen.append(params["request"]["url"])
            answer = {
                "requestId": params["requestId"],
                "responseCode": 200,
                "responseHeaders": [{"name": "Content-Type", "value": "text/html"}],
                "body": body,
            }
            task = asyncio.create_task(self._send("Fetch.fulfillRequest", answer))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)

        self._connection.listen("Fetch.requestPaused", paused, session=self._session)
        await self._send(
            "Fetch.enable", {"patterns": [{"urlPattern": url_pattern, "requestStage": "Request"}]}
        )
        return seen

    async def screenshot(self, path: Path) -> None:
        """Save what the viewport shows as a PNG file."""
        result = await self._send("Page.captureScreenshot", {"format": "png"})
        await asyncio.to_thread(path.write_bytes, base64.b64decode(result["data"]))

    async def add_virtual_authenticator(
        self, *, user_verified: bool = True, resident_key: bool = True, can_verify: bool = True
    ) -> str:
        """Attach a platform passkey authenticator (CTAP2, internal, with UV unless
        `can_verify` is False) and return its id."""
        await self._send("WebAuthn.enable", {"enableUI": False})
        result = await self._send(
            "WebAuthn.addVirtualAuthenticator",
            {
                "options": {
                    "protocol": "ctap2",
                    "transport": "internal",
                    "hasResidentKey": resident_key,
                    "hasUserVerification": can_verify,
                    "isUserVerified": user_verified,
                    "automaticPresenceSimulation": True,
                }
            },
        )
        self._authenticator = str(result["authenticatorId"])
        return self._authenticator

    async def remove_virtual_authenticator(self) -> None:
        """Detach the authenticator (another device can then be attached)."""
        await self._send(
            "WebAuthn.removeVirtualAuthenticator",
            {"authenticatorId": self._require_authenticator()},
        )
        self._authenticator = None

    async def set_user_verified(self, verified: bool) -> None:
        """Make the authenticator's next user verification succeed or fail."""
        await self._send(
            "WebAuthn.setUserVerified",
            {"authenticatorId": self._require_authenticator(), "isUserVerified": verified},
        )

    async def credentials(self) -> list[Credential]:
        """The credentials the virtual authenticator holds."""
        result = await self._send(
            "WebAuthn.getCredentials", {"authenticatorId": self._require_authenticator()}
        )
        return msgspec.convert(result["credentials"], list[Credential])

    def _require_authenticator(self) -> str:
        if self._authenticator is None:
            raise BrowserError("no virtual authenticator: call add_virtual_authenticator first")
        return self._authenticator

    async def _send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._connection.send(method, params, session=self._session)

    def _console(self, params: dict[str, Any]) -> None:
        words = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
        self.log.append(f"console.{params.get('type')}: {' '.join(words)}")

    def _exception(self, params: dict[str, Any]) -> None:
        details = params.get("exceptionDetails", {})
        text = details.get("exception", {}).get("description") or details.get("text", "")
        self.log.append(f"uncaught: {text}")
