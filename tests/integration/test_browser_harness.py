"""The headless Chromium harness: passkeys end to end against py_webauthn, and its lifecycle.

The passkey tests drive tests/support/passkey_site.py (HTTPS with the per-run test CA's
localhost certificate) through a virtual CTAP2 authenticator; the server's verification
outcome is what they assert.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from webauthn.helpers.structs import UserVerificationRequirement

from support.browser import BrowserError, Page, browser, live_members
from support.passkey_site import SESSION_COOKIE, PasskeySite, passkey_site
from support.services import Services

ROOT = Path(__file__).resolve().parents[2]
STATUS = "document.getElementById('status').textContent"
NOT_ALLOWED = "failed: NotAllowedError: The operation either timed out or was not allowed."


async def press(page: Page, button: str) -> str:
    """Click a button of the passkey page and return the status line it ends with."""
    await page.click(button)
    status: str = await page.wait_for(f"(s => s !== '' && s !== 'working' && s)({STATUS})")
    return status


async def register(page: Page, site: PasskeySite, name: str = "alice") -> str:
    """Open the passkey page, type a name and create a passkey; return the status line."""
    await page.goto(site.url)
    await page.fill("#name", name)
    return await press(page, "#register")


@pytest.mark.services
async def test_a_passkey_registers_and_signs_in_with_the_user_verified(services: Services) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)

        assert "registered" == await register(page, site)
        assert "signed in" == await press(page, "#signin")

        [registration] = site.registrations
        [sign_in] = site.sign_ins
        [held] = await page.credentials()
        assert (True, True) == (registration.user_verified, sign_in.user_verified)
        assert registration.credential_id == sign_in.credential_id == held.credential_id
        assert ("localhost", True) == (held.rp_id, held.is_resident_credential)
        assert ["alice"] == site.user_names
        assert [] == site.refusals


@pytest.mark.services
async def test_the_server_refuses_a_sign_in_whose_user_was_not_verified(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        assert "registered" == await register(page, site)
        # A page that does not ask for verification gets an assertion without the UV flag.
        site.signin_asks = UserVerificationRequirement.DISCOURAGED
        await page.set_user_verified(False)

        status = await press(page, "#signin")

        reason = (
            "InvalidAuthenticationResponse: "
            "User verification is required but user was not verified during authentication"
        )
        assert f"failed: Error: {reason}" == status
        assert ([reason], []) == (site.refusals, site.sign_ins)


@pytest.mark.services
async def test_the_browser_refuses_a_required_verification_that_fails(services: Services) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        assert "registered" == await register(page, site)
        await page.set_user_verified(False)

        status = await press(page, "#signin")

        assert status.startswith(NOT_ALLOWED)
        assert ([], []) == (site.refusals, site.sign_ins)  # nothing reached the server


@pytest.mark.services
async def test_an_authenticator_that_cannot_verify_the_user_registers_nothing(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=False)

        status = await register(page, site)

        assert status.startswith(NOT_ALLOWED)
        assert ([], [], []) == (site.registrations, site.refusals, await page.credentials())


@pytest.mark.services
async def test_an_ip_address_origin_cannot_use_passkeys(services: Services) -> None:
    tls = services.dir / "tls"
    async with (
        passkey_site(tls, host="127.0.0.1", rp_id="127.0.0.1") as site,
        browser(trust=tls / "server.crt") as chromium,
    ):
        page = await chromium.open_page()
        await page.add_virtual_authenticator()

        status = await register(page, site)

        assert "failed: SecurityError: This is an invalid domain." == status
        assert [] == site.registrations


@pytest.mark.services
async def test_a_sign_in_leaves_the_session_cookie_the_site_set(services: Services) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator()
        assert "registered" == await register(page, site)
        assert [] == await page.cookies()

        assert "signed in" == await press(page, "#signin")

        [cookie] = await page.cookies()
        assert (SESSION_COOKIE, "signed-in", "localhost", True, True, "Lax") == (
            cookie.name,
            cookie.value,
            cookie.domain,
            cookie.secure,
            cookie.http_only,
            cookie.same_site,
        )
        assert site.url == await page.current_url()


@pytest.mark.services
async def test_a_click_that_leaves_the_page_can_wait_for_the_next_one(services: Services) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page(f'data:text/html,<a id="go" href="{site.url}">go</a>')

        async with page.navigation():
            await page.click("#go")

        assert (site.url, "Passkey test") == (
            await page.current_url(),
            await page.evaluate("document.title"),
        )


@pytest.mark.services
async def test_a_site_with_the_test_ca_certificate_is_refused_unless_trusted(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser() as chromium:
        page = await chromium.open_page()
        with pytest.raises(BrowserError, match="net::ERR_CERT_AUTHORITY_INVALID"):
            await page.goto(site.url)


@pytest.mark.services
async def test_a_screenshot_is_a_png_of_the_viewport(services: Services, tmp_path: Path) -> None:
    tls = services.dir / "tls"
    async with passkey_site(tls) as site, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page(site.url)
        shot = tmp_path / "passkey-page.png"

        await page.screenshot(shot)

        data = shot.read_bytes()
        width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
        assert (b"\x89PNG\r\n\x1a\n", 1024) == (data[:8], width)
        assert height > 0


async def test_the_browser_and_its_children_stop_when_the_block_ends() -> None:
    async with browser() as chromium:
        await chromium.open_page("data:text/html,<p>hello</p>")
        assert len(live_members(chromium.pid)) > 1  # the browser and its helpers

    assert [] == live_members(chromium.pid)


async def test_the_browser_stops_when_the_block_raises() -> None:
    pids: list[int] = []
    with pytest.raises(ZeroDivisionError):
        async with browser() as chromium:
            pids.append(chromium.pid)
            _ = 1 / 0

    assert [] == live_members(pids[0])


async def test_the_browser_stops_when_the_test_is_cancelled() -> None:
    pids: list[int] = []
    started = asyncio.Event()

    async def hold() -> None:
        async with browser() as chromium:
            pids.append(chromium.pid)
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hold())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert [] == live_members(pids[0])


HOLDER = """
import asyncio, sys
sys.path[:0] = [sys.argv[1]]
from support.browser import browser
async def main():
    async with browser() as chromium:
        print(chromium.pid, flush=True)
        await asyncio.sleep(60)
asyncio.run(main())
"""


async def test_the_browser_dies_with_a_test_process_that_was_killed() -> None:
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, str(ROOT / "tests"), stdout=subprocess.PIPE
    )
    try:
        pid = int(await asyncio.wait_for(holder.stdout.readline(), 30))  # type: ignore[union-attr]
        assert len(live_members(pid)) > 1
        holder.send_signal(signal.SIGKILL)  # no finally block runs: the kernel must do it
        await holder.wait()
        for _ in range(200):
            if not live_members(pid):
                break
            await asyncio.sleep(0.05)
        assert [] == live_members(pid)
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()


async def test_a_browser_that_fails_to_start_says_why(tmp_path: Path) -> None:
    broken = tmp_path / "chromium"
    broken.write_text("#!/bin/sh\necho 'Missing X server or $DISPLAY' >&2\nexit 3\n")
    broken.chmod(0o755)

    with pytest.raises(BrowserError) as raised:
        async with browser(binary=str(broken)):
            pass

    message = str(raised.value)
    assert message.startswith("Chromium exited with status 3 before DevTools was up")
    assert message.endswith("Missing X server or $DISPLAY\n")
