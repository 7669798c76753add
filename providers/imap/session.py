"""One logged-in IMAP connection: typed commands over aioimaplib's protocol, typed errors only.

Commands run one at a time under the session lock, each under the mailbox timeout
(providers.imap.channel holds that machinery).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterable, Sequence
from datetime import datetime

from aioimaplib import aioimaplib as _aio

from providers.imap import codec, responses
from providers.imap.channel import ImapChannel, as_response
from providers.imap.codec import Arg
from providers.imap.responses import ImapResponse, SelectResult, StatusResult
from providers.imap.wire import WireProtocol
from providers.oauth2.source import AccessToken, xoauth2_initial_response
from schemas.errors import (
    InvalidArguments,
    OutcomeUnknown,
    SafetyLimit,
    ServiceUnavailable,
)
from schemas.secret import Secret

# Commands that change the mailbox: a lost reply means the outcome is unknown, not "failed".
_MUTATING = frozenset(
    {
        "APPEND",
        "COPY",
        "CREATE",
        "DELETE",
        "EXPUNGE",
        "MOVE",
        "RENAME",
        "STORE",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "SETACL",
        "DELETEACL",
        "SETQUOTA",
    }
)
_NEEDS_SELECTED = frozenset(
    {"CHECK", "COPY", "EXPUNGE", "MOVE", "SEARCH", "SORT", "STORE", "THREAD", "FETCH"}
)
# CLOSE and plain EXPUNGE expunge every \Deleted message of the folder;
# FETCH goes through uid_fetch (batching), APPEND/LOGIN/LOGOUT/SELECT through their methods.
_REFUSED = frozenset(
    {
        "CLOSE",
        "FETCH",
        "APPEND",
        "LOGIN",
        "LOGOUT",
        "AUTHENTICATE",
        "IDLE",
        "STARTTLS",
        "COMPRESS",
        "SELECT",
        "EXAMINE",
    }
)


LAST_UID_NEXT_FOLDERS = 256  # remembered per session; forgotten all at once past this


class LoginRefused(ServiceUnavailable):
    """The server refused the credentials themselves (a tagged NO): a token is worth forgetting."""


class ImapSession(ImapChannel):
    """A connected IMAP session; build it with providers.imap.connect.connect()."""

    # UIDNEXT as this session last saw it, per folder: a guess for planning a search window
    # before the EXAMINE answers, never trusted (the caller compares it with the answer).
    last_uid_next: dict[str, int]

    def __init__(self, transport: asyncio.Transport, wire: WireProtocol, timeout_s: float):
        super().__init__(transport, wire, timeout_s)
        self.last_uid_next = {}

    # --- state ------------------------------------------------------------------------------

    def begin_lease(self) -> None:
        """Start a new user's lease: fresh read budget and no assumed selected mailbox."""
        self._wire.lease_bytes = 0
        # The server may still have a mailbox selected; the next user must SELECT/EXAMINE
        # explicitly, and selected-state commands are refused until it does.
        self.selected = None
        self.selected_name = None

    # --- handshake --------------------------------------------------------------------------

    async def handshake(self) -> None:
        """Wait for the greeting and learn the pre-login capabilities."""
        try:
            async with asyncio.timeout(self._timeout_s):
                greeting = await self._wire.greeting
        except (TimeoutError, ConnectionError):
            self._break()
            raise ServiceUnavailable("the IMAP server sent no greeting") from None
        word, _, rest = greeting.removeprefix(b"* ").partition(b" ")
        if word.upper() != b"OK":  # BYE, or PREAUTH without the LOGIN we are configured for
            self._break()
            raise ServiceUnavailable("the IMAP server refused the connection")
        code = responses.response_code(rest)
        if code is not None and code[0] == "CAPABILITY":
            self._set_capabilities(responses.parse_capability_atoms(code[1]))
        else:
            await self._refresh_capabilities()

    async def login(self, username: str, password: Secret) -> None:
        """LOGIN with both arguments quoted or sent as literals; any failure is generic."""
        if "LOGINDISABLED" in self.capabilities:
            self._break()
            raise ServiceUnavailable()
        try:
            user = codec.string_arg(username, non_sync_literal_max=self._literal_max)
            secret = codec.string_arg(password.reveal(), non_sync_literal_max=self._literal_max)
        except InvalidArguments:
            self._break()
            raise ServiceUnavailable() from None
        command = self._make("LOGIN", (user, secret))
        try:
            response = await self._run(command, scrub=secret)
        except ServiceUnavailable:
            raise ServiceUnavailable() from None  # one generic message for every auth failure
        if not response.ok:
            self._break()
            raise ServiceUnavailable()
        await self._logged_in(response)

    def require_xoauth2(self) -> None:
        """Raise ServiceUnavailable unless the server offers AUTH=XOAUTH2 before login."""
        if "AUTH=XOAUTH2" not in self.capabilities:
            self._break()
            raise ServiceUnavailable("the IMAP server does not offer XOAUTH2 login")

    async def authenticate_xoauth2(self, username: str, token: AccessToken) -> None:
        """AUTHENTICATE XOAUTH2 with `token`; LoginRefused when the server refuses it."""
        self.require_xoauth2()  # before the token goes anywhere
        response_b64 = _xoauth2_response(username, token)
        if response_b64 is None:
            self._break()
            raise ServiceUnavailable()
        self._wire.start_sasl(response_b64, inline="SASL-IR" in self.capabilities)
        try:
            response = await self._run(self._make("AUTHENTICATE", (codec.raw("XOAUTH2"),)))
        except ServiceUnavailable:
            # After a challenge (the server's refusal) a lost final reply changes nothing.
            if self._wire.sasl_challenged:
                raise LoginRefused() from None
            raise ServiceUnavailable() from None  # one generic message for every auth failure
        finally:
            self._wire.end_sasl()
        if response.ok and not self._wire.sasl_challenged:
            await self._logged_in(response)
            return
        self._break()
        code = responses.response_code(response.text)
        # A challenge is a refusal whatever the tagged reply says; NO [UNAVAILABLE] (RFC 5530)
        # without one is the server's trouble, not the token's.
        unavailable = code is not None and code[0] == "UNAVAILABLE"
        if self._wire.sasl_challenged or (response.status == "NO" and not unavailable):
            raise LoginRefused()
        raise ServiceUnavailable()

    async def _logged_in(self, response: ImapResponse) -> None:
        self._wire.state = _aio.AUTH
        atoms = responses.capabilities_in(response)
        if atoms is None:
            await self._refresh_capabilities()
        else:
            self._set_capabilities(atoms)

    async def _refresh_capabilities(self) -> None:
        response = await self._run(self._make("CAPABILITY", ()))
        atoms = responses.capabilities_in(response) if response.ok else None
        if atoms is None:
            self._break()
            raise ServiceUnavailable("the IMAP server sent no capabilities")
        self._set_capabilities(atoms)

    # --- commands ---------------------------------------------------------------------------

    async def command(
        self,
        name: str,
        *args: Arg,
        uid: bool = False,
        untagged: str | None = None,
        check: bool = True,
    ) -> ImapResponse:
        """Run one command (args from providers.imap.codec); NO/BAD → ServiceUnavailable if check.

        `uid` sends the UID form (UID COPY/MOVE/STORE/EXPUNGE/SEARCH); `untagged` names the
        untagged responses to collect when they differ from the command name (e.g. ESEARCH).
        """
        name = name.upper()
        if name in _REFUSED or name not in _aio.Commands or (name == "EXPUNGE" and not uid):
            raise ValueError(f"{name} is not available through ImapSession.command")
        return await self._command(name, args, uid=uid, untagged=untagged, check=check)

    async def _command(
        self,
        name: str,
        args: Sequence[Arg],
        *,
        uid: bool = False,
        untagged: str | None = None,
        check: bool = True,
    ) -> ImapResponse:
        if (uid or name in _NEEDS_SELECTED) and self.selected is None:
            raise RuntimeError(f"{name} needs a mailbox selected in this lease")
        if name == "STORE" and untagged is None:
            untagged = "FETCH"
        command = self._make(name, args, prefix="UID" if uid else None, untagged=untagged)
        response = await self._run(command, mutating=name in _MUTATING)
        if check and not response.ok:
            raise ServiceUnavailable(f"the IMAP server refused {'UID ' if uid else ''}{name}")
        return response

    async def uid_fetch(self, uids: Iterable[int], items: Arg) -> ImapResponse:
        """UID FETCH `items` for the given UIDs in batches of at most 500; lines are merged."""
        lines: list[bytes] = []
        text = b""
        for batch in codec.uid_batches(uids):
            response = await self._command("FETCH", (codec.uid_set(batch), items), uid=True)
            lines.extend(response.lines)
            text = response.text
        return ImapResponse(status="OK", text=text, lines=lines)

    async def uid_search(self, *criteria: Arg) -> list[int]:
        """UID SEARCH with the given criteria (no CHARSET argument); return the UIDs."""
        response = await self._command("SEARCH", criteria, uid=True)
        return responses.parse_search(response)

    async def status(self, mailbox: str, items: Sequence[str]) -> StatusResult:
        """STATUS `mailbox` for the given item names (MESSAGES, UIDNEXT, UIDVALIDITY, ...)."""
        wanted = codec.raw("(" + " ".join(codec.atom(i) for i in items) + ")")
        response = await self._command("STATUS", (codec.mailbox_arg(mailbox), wanted))
        return responses.parse_status(response)

    async def examine(self, mailbox: str) -> SelectResult:
        """Open `mailbox` read-only (EXAMINE, with CONDSTORE when advertised)."""
        return await self._open("EXAMINE", mailbox)

    async def select(self, mailbox: str) -> SelectResult:
        """Open `mailbox` read-write (SELECT, with CONDSTORE when advertised)."""
        return await self._open("SELECT", mailbox)

    async def _open(self, name: str, mailbox: str) -> SelectResult:
        command = self._make(name, self._open_args(mailbox))
        self.selected = None
        self.selected_name = None
        return self._opened(name, mailbox, await self._run(command))

    async def examine_and_fetch(
        self, mailbox: str, uids: Sequence[int], items: Arg
    ) -> tuple[SelectResult, ImapResponse]:
        """EXAMINE `mailbox` with a UID FETCH of `uids` sent right behind it: one round trip.

        The FETCH must only read (BODY.PEEK): the caller checks the selection before it uses
        the answer, and an answer read under another UIDVALIDITY is simply dropped.
        """
        return await self._examine_with(mailbox, "FETCH", (codec.uid_set(uids), items))

    async def examine_and_search(
        self, mailbox: str, *criteria: Arg
    ) -> tuple[SelectResult, list[int]]:
        """EXAMINE `mailbox` with a UID SEARCH sent right behind it: one round trip.

        Criteria with a synchronizing literal cannot go out before the server asks for it;
        the caller checks the selection before it trusts the UIDs.
        """
        selected, answer = await self._examine_with(mailbox, "SEARCH", criteria)
        return selected, responses.parse_search(answer)

    async def _examine_with(
        self, mailbox: str, name: str, args: Sequence[Arg]
    ) -> tuple[SelectResult, ImapResponse]:
        examine = self._make("EXAMINE", self._open_args(mailbox))
        behind = self._make(name, args, prefix="UID")  # FETCH or SEARCH: both only read
        self.selected = None
        self.selected_name = None
        opened, answered = await self._guarded(
            lambda: self._wire.execute_pair(examine, behind), "EXAMINE", False
        )
        result = self._opened("EXAMINE", mailbox, as_response(opened))
        answer = as_response(answered)
        if not answer.ok:
            raise ServiceUnavailable(f"the IMAP server refused UID {name}")
        return result, answer

    def _open_args(self, mailbox: str) -> list[Arg]:
        args = [codec.mailbox_arg(mailbox)]
        if "CONDSTORE" in self.capabilities:
            args.append(codec.raw("(CONDSTORE)"))
        return args

    def _opened(self, name: str, mailbox: str, response: ImapResponse) -> SelectResult:
        if not response.ok:
            self._wire.state = _aio.AUTH  # a failed SELECT leaves nothing selected (RFC 3501)
            raise ServiceUnavailable(f"the IMAP server refused {name}")
        self._wire.state = _aio.SELECTED
        result = responses.parse_select(response)
        self.selected = result
        self.selected_name = mailbox
        if len(self.last_uid_next) >= LAST_UID_NEXT_FOLDERS:
            self.last_uid_next.clear()
        self.last_uid_next[mailbox] = result.uid_next
        return result

    async def append(
        self,
        mailbox: str,
        message: bytes,
        *,
        flags: Sequence[str] = (),
        internal_date: datetime | None = None,
    ) -> ImapResponse:
        """APPEND `message` to `mailbox` with the given flags; read APPENDUID with codec."""
        args: list[Arg] = [codec.mailbox_arg(mailbox)]
        args.append(codec.raw("(" + " ".join(codec.atom(f) for f in flags) + ")"))
        if internal_date is not None:
            if internal_date.tzinfo is None:
                raise InvalidArguments("the internal date needs a time zone")
            args.append(codec.quote(internal_date.strftime("%d-%b-%Y %H:%M:%S %z")))
        args.append(codec.raw(f"{{{len(message)}}}"))
        command = self._make("APPEND", args)
        # aioimaplib writes literal_data on the server's "+" continuation.
        self._wire.literal_data = message
        try:
            response = await self._run(command, mutating=True)
        finally:
            self._wire.literal_data = None
        if not response.ok:
            raise ServiceUnavailable("the IMAP server refused APPEND")
        return response

    async def noop(self) -> ImapResponse:
        """NOOP: a health check that also collects pending untagged updates."""
        return await self._command("NOOP", ())

    async def logout(self) -> None:
        """LOGOUT politely (errors ignored), then close the connection."""
        if self.usable:
            try:
                async with asyncio.timeout(min(self._timeout_s, 5.0)):
                    await self._run(self._make("LOGOUT", ()))
            except (TimeoutError, ServiceUnavailable, OutcomeUnknown, SafetyLimit):
                pass
        await self.close()


def _xoauth2_response(username: str, token: AccessToken) -> bytes | None:
    # A UnicodeEncodeError keeps the whole string it failed on: never let it escape.
    try:
        return base64.b64encode(xoauth2_initial_response(username, token.value))
    except UnicodeError:
        return None
