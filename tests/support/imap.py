"""Raw IMAP helpers for integration tests (aioimaplib against the test Dovecot).

aioimaplib neither quotes nor encodes arguments and does not parse APPENDUID, so these helpers
do it. They are independent of the product's IMAP code on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import aioimaplib

from support.mailbox_names import quote_mailbox
from support.services import Services

APPENDUID_RE = re.compile(rb"\[APPENDUID (\d+) (\d+)\]")


class IMAPCommandError(AssertionError):
    """An IMAP command a test relied on did not answer OK."""


@dataclass(frozen=True)
class Append:
    """One message to APPEND, with optional flags and internal date."""

    message: bytes
    flags: Sequence[str] = field(default_factory=tuple)
    internal_date: datetime | None = None


@dataclass(frozen=True)
class AppendResult:
    """UIDVALIDITY of the folder and the UID of every appended message, in order."""

    folder: str
    uidvalidity: int
    uids: list[int]


def ok(response: aioimaplib.Response, what: str) -> aioimaplib.Response:
    """The response, or IMAPCommandError when it is not OK."""
    if response.result != "OK":
        raise IMAPCommandError(f"{what}: {response.result} {response.lines!r}")
    return response


async def open_session(
    services: Services, user: str = "alice", *, command_timeout: float = 10
) -> aioimaplib.IMAP4_SSL:
    """A logged-in IMAP4_SSL session as "alice" or "bob", verified against the test CA."""
    login, password = services.credentials(user)
    imap = aioimaplib.IMAP4_SSL(
        host=services.imap_host,
        port=services.imap_port,
        timeout=command_timeout,
        ssl_context=services.ssl_context(),
    )
    await imap.wait_hello_from_server()
    ok(await imap.login(login, password), f"LOGIN {login}")
    return imap


async def close_session(imap: aioimaplib.IMAP4_SSL) -> None:
    """LOGOUT, ignoring a connection that is already gone."""
    with contextlib.suppress(TimeoutError, aioimaplib.Abort, OSError):
        await imap.logout()


async def create_folder(imap: aioimaplib.IMAP4_SSL, prefix: str = "test") -> str:
    """CREATE a fresh, uniquely named folder and return its (decoded) name."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    ok(await imap.create(quote_mailbox(name)), f"CREATE {name}")
    return name


async def append_messages(
    imap: aioimaplib.IMAP4_SSL, folder: str, messages: Sequence[Append | bytes]
) -> AppendResult:
    """APPEND each message to folder; returns UIDVALIDITY and UIDs parsed from APPENDUID."""
    uidvalidity = 0
    uids: list[int] = []
    for item in messages:
        spec = item if isinstance(item, Append) else Append(item)
        flags = "(" + " ".join(spec.flags) + ")" if spec.flags else None
        response = ok(
            await imap.append(
                spec.message, mailbox=quote_mailbox(folder), flags=flags, date=spec.internal_date
            ),
            f"APPEND to {folder}",
        )
        match = next(
            (m for line in response.lines if (m := APPENDUID_RE.search(bytes(line)))), None
        )
        if match is None:
            raise IMAPCommandError(f"APPEND to {folder}: no APPENDUID in {response.lines!r}")
        uidvalidity = int(match[1])
        uids.append(int(match[2]))
    return AppendResult(folder=folder, uidvalidity=uidvalidity, uids=uids)


async def folder_message_count(imap: aioimaplib.IMAP4_SSL, folder: str) -> int:
    """MESSAGES from STATUS."""
    response = ok(await imap.status(quote_mailbox(folder), "(MESSAGES)"), f"STATUS {folder}")
    for line in response.lines:
        m = re.search(rb"MESSAGES (\d+)", bytes(line))
        if m:
            return int(m[1])
    raise IMAPCommandError(f"STATUS {folder}: no MESSAGES in {response.lines!r}")


def dovecot_login_count(user: str, log: Path | str | None = None) -> int:
    """How many successful IMAP logins of user Dovecot has logged so far."""
    if log is None:
        log = os.environ["MAILTEST_DOVECOT_LOG"]
    needle = f": Login: user=<{user}>,"
    with open(log, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if needle in line)


async def wait_for_login_count(
    user: str, at_least: int, log: Path | str | None = None, within: float = 5
) -> int:
    """Poll the Dovecot log (its writer is asynchronous) until user has at_least logins."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        count = dovecot_login_count(user, log)
        if count >= at_least or asyncio.get_running_loop().time() > deadline:
            return count
        await asyncio.sleep(0.02)
