"""Headless Chromium from Debian's `chromium` package, driven over the DevTools Protocol.

    async with browser(trust=services.dir / "tls" / "server.crt") as b:
        page = await b.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        await page.goto("https://localhost:1234/")
        await page.click("#register")

The browser runs in its own process group with a fresh profile under a temp dir and is killed
with its whole group on exit (also on a failed test or Ctrl-C; and by the kernel when the test
process dies, through setpriv's parent-death signal). Host names other than localhost do not
resolve, so a page can reach loopback only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from support.cdp import MAX_MESSAGE, BrowserError, Connection
from support.page import Page

__all__ = [
    "Browser",
    "BrowserError",
    "Page",
    "browser",
    "find_chromium",
    "live_members",
    "spki_pin",
]

# Debian's /usr/bin/chromium is a shell wrapper that sources /etc/chromium.d (extension
# loading, API keys, a /dev/shm probe); the tests run the binary itself with flags of their own.
CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser")

FLAGS = (
    "--headless=new",
    "--remote-debugging-port=0",
    "--remote-debugging-address=127.0.0.1",
    "--disable-gpu",
    # Every name but the loopback ones fails to resolve before any connection is tried.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE [::1]",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    # Two background fetches the flags above leave on (form crowdsourcing, network time).
    "--disable-features=AutofillServerCommunication,NetworkTimeServiceQuerying",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--window-size=1024,768",
)

# A navigation that fails to resolve would make the error page probe public DNS servers
# (a real query to the system resolver and 8.8.8.8); this preference turns the probes off.
PREFERENCES = '{"alternate_error_pages": {"enabled": false}}'


def find_chromium() -> str:
    """The Chromium binary to run, or a BrowserError that says how to install it."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError("Chromium not found: install Debian's chromium (scripts/bootstrap)")


def spki_pin(cert_pem: bytes) -> str:
    """Base64 SHA-256 of a certificate's SubjectPublicKeyInfo, as Chromium's SPKI list takes it."""
    spki = (
        x509.load_pem_x509_certificate(cert_pem)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode("ascii")


class Browser:
    """A running Chromium: open pages in it; the context manager stops it."""

    def __init__(self, connection: Connection, pid: int, started_in: float) -> None:
        self._connection = connection
        self.pid = pid
        self.started_in = started_in  # seconds from exec to a DevTools connection

    async def open_page(self, url: str = "about:blank") -> Page:
        """Open a new tab at `url` (waiting for its load event) and attach to it."""
        created = await self._connection.send("Target.createTarget", {"url": "about:blank"})
        attached = await self._connection.send(
            "Target.attachToTarget", {"targetId": created["targetId"], "flatten": True}
        )
        page = Page(self._connection, attached["sessionId"])
        await page.start()
        if url != "about:blank":
            await page.goto(url)
        return page


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return "(no stderr)"
    return data.decode("utf-8", "replace") or "(empty stderr)"


async def _wait_for_port(
    port_file: Path, process: asyncio.subprocess.Process, stderr: Path, patience: float
) -> tuple[int, str]:
    """The DevTools port and browser path Chromium writes once it listens."""
    deadline = time.monotonic() + patience
    while True:
        with contextlib.suppress(OSError, ValueError, IndexError):
            lines = (await asyncio.to_thread(port_file.read_text)).splitlines()
            if len(lines) >= 2:
                return int(lines[0]), lines[1]
        if process.returncode is not None:
            raise BrowserError(
                f"Chromium exited with status {process.returncode} before DevTools was up; "
                f"stderr tail:\n{_tail(stderr)}"
            )
        if time.monotonic() > deadline:
            raise BrowserError(
                f"Chromium did not open DevTools within {patience} s; stderr tail:\n{_tail(stderr)}"
            )
        await asyncio.sleep(0.05)


def live_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that have not exited (zombies awaiting a reaper excluded)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # After the command name in parentheses: state, parent pid, process group, ...
        state, _parent, group = stat.rpartition(")")[2].split()[:3]
        if int(group) == pgid and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Kill the browser's whole process group and wait until none of it is left running."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # a throwaway profile needs no clean shutdown
    await process.wait()
    deadline = time.monotonic() + 10
    while survivors := await asyncio.to_thread(live_members, process.pid):
        if time.monotonic() > deadline:
            raise BrowserError(f"browser processes {survivors} outlived SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # a child forked after the first signal
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def browser(
    *, trust: Path | None = None, start_timeout: float = 30.0, binary: str | None = None
) -> AsyncIterator[Browser]:
    """Run headless Chromium; `trust` is a server certificate whose key it accepts for TLS."""
    binary = binary or find_chromium()
    with tempfile.TemporaryDirectory(prefix="angelos-chromium-") as tmp:
        home = Path(tmp)
        profile = home / "profile"
        stderr_path = home / "stderr.log"
        (profile / "Default").mkdir(parents=True)
        (profile / "Default" / "Preferences").write_text(PREFERENCES)
        args = [*FLAGS, f"--user-data-dir={profile}"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
        if trust is not None:
            pin = spki_pin(await asyncio.to_thread(trust.read_bytes))
            args.append(f"--ignore-certificate-errors-spki-list={pin}")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "TMPDIR": str(home),
            "LANG": "C.UTF-8",
        }
        command = [binary, *args, "about:blank"]
        setpriv = shutil.which("setpriv")
        if setpriv is not None:
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        started = time.monotonic()
        with stderr_path.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
        try:
            port, path = await _wait_for_port(
                profile / "DevToolsActivePort", process, stderr_path, start_timeout
            )
            async with aiohttp.ClientSession() as http:
                ws = await http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=MAX_MESSAGE)
                connection = Connection(ws, lambda: f"stderr tail:\n{_tail(stderr_path)}")
                try:
                    yield Browser(connection, process.pid, time.monotonic() - started)
                finally:
                    await connection.close()
        finally:
            await _stop(process)
