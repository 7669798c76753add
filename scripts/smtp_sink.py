"""A controllable SMTP sink for tests: implicit TLS, AUTH required, steered by recipient.

The behaviour is chosen by each recipient's local part (case-insensitive):

  rcpt-NNN@..   reply NNN (4xx/5xx) to that RCPT
  data-NNN@..   accept the RCPT, reply NNN after DATA (nothing stored)
  drop@..       store the message (and file its Sent copy), then abort the TCP connection
                without a reply
  vanish@..     abort the TCP connection after the final dot without storing or filing anything
  slow-X@..     store, wait X seconds (X may be fractional, e.g. slow-0.5), then reply 250
  stall-X@..    wait X seconds before answering that RCPT (250): a send held before its DATA
  hang@..       store and never reply; the connection stays open until the client goes away
  anything else store and reply 250

Every DATA transaction is appended as one JSON line to $SPOOL/transactions.jsonl before any
reply is sent: n, mail_from, rcpt_tos, outcome ("accepted", "rejected-NNN", "dropped",
"vanished", "slow", "hang", or "incomplete" when the client vanished before the final dot),
connection (which accepted connection carried it, numbered from 1), data_started_at (when the
DATA command arrived), terminator_at (when the final dot arrived), bytes, stored, filed (whether
the Sent copy was filed; null without --sent-imap). A refused RCPT is a line too (outcome
"rcpt-NNN", no terminator). Stored messages are $SPOOL/<n>.eml, the exact bytes received. With
SINK_LMTP=host:port they are also relayed to Dovecot (best effort).

Without --xoauth2-user the only login is AUTH PLAIN as alice@example.test / alicepw. With it the
sink is shaped like Gmail's submission server: the only mechanism is XOAUTH2, and the bearer
token must be a JWT signed (ES256) by the key in --xoauth2-key under --xoauth2-kid, issued by
--xoauth2-issuer, for `sub` = the XOAUTH2 user = --xoauth2-user, not expired. A refused token
gets `334 <base64 JSON error>`; the client's empty answer then gets 535. With --sent-imap the
sink files each stored message (exact bytes, flagged as seen) into --sent-folder over IMAP APPEND
(user --sent-user, password $SINK_SENT_PASSWORD, TLS verified against --ca) before replying.

usage: smtp_sink.py --port PORT [--starttls-port PORT] [--host 127.0.0.1 --host ::1]
                    --cert CRT --key KEY
                    [--spool DIR (default $SINK_DIR)] [--lmtp HOST:PORT (default $SINK_LMTP)]
                    [--ready FILE (written with our pid once listening)]
                    [--xoauth2-user U --xoauth2-key PUBLIC.pem --xoauth2-kid KID
                     --xoauth2-issuer URL]
                    [--sent-imap HOST:PORT --sent-user U --ca CA.crt [--sent-folder NAME]]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import collections
import json
import logging
import os
import re
import signal
import smtplib
import ssl
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

from aiosmtpd.smtp import MISSING, SMTP, AuthResult, Envelope, LoginPassword, Session
from joserfc.jwk import ECKey
from sink_xoauth2 import AUTH_LINE_LIMIT, BearerRules, SentFolder

USERNAME = b"alice@example.test"
PASSWORD = b"alicepw"
# Shaped like Gmail's: `334 <base64 JSON>`, then 535 once the client answered.
XOAUTH2_ERROR = json.dumps({"status": "401", "schemes": "Bearer"}).encode()
XOAUTH2_REFUSED = "535 5.7.8 Username and Password not accepted (sink)"

RCPT_RE = re.compile(r"rcpt-([45]\d\d)")
DATA_RE = re.compile(r"data-([45]\d\d)")
SLOW_RE = re.compile(r"slow-(\d+(?:\.\d+)?)")
STALL_RE = re.compile(r"stall-(\d+(?:\.\d+)?)")


def local_part(address: str) -> str:
    """The lower-cased local part of an address."""
    return address.rsplit("@", 1)[0].lower()


class Spool:
    """Numbered transaction log and message store in one directory."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.log_path = os.path.join(directory, "transactions.jsonl")
        self.count = 0

    def next_number(self) -> int:
        self.count += 1
        return self.count

    def store(self, n: int, content: bytes) -> None:
        path = os.path.join(self.directory, f"{n}.eml")
        with open(path + ".tmp", "wb") as f:
            f.write(content)
        os.replace(path + ".tmp", path)

    def record(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


class SinkSMTP(SMTP):
    """aiosmtpd's SMTP with the DATA arrival time and an unfinished DATA recorded."""

    # The reader's line limit, fixed at construction: long enough for an AUTH line of
    # AUTH_LINE_LIMIT bytes. Message lines are still held to RFC 5321's 1000 (see __init__).
    line_length_limit = AUTH_LINE_LIMIT + 2
    data_started_at: float | None = None
    terminator_seen: bool = False
    connection: int = 0  # numbered per accepted connection, so tests can see session reuse

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.line_length_limit = SMTP.line_length_limit  # DATA lines: RFC 5321 §4.5.3.1.6
        # aiosmtpd keeps these limits in one class-wide dict (and clears it per connection):
        # give each connection its own, with room for a long AUTH line.
        self.command_size_limits = collections.defaultdict(
            lambda: SMTP.command_size_limit, {"AUTH": AUTH_LINE_LIMIT}
        )

    async def smtp_DATA(self, arg: str) -> None:
        self.data_started_at = time.time()
        self.terminator_seen = False
        try:
            await super().smtp_DATA(arg)
        except asyncio.CancelledError:
            envelope = self.envelope
            if not self.terminator_seen and envelope is not None and envelope.rcpt_tos:
                handler: SinkHandler = self.event_handler
                handler.record_incomplete(envelope, self.data_started_at, self.connection)
            raise


class SinkHandler:
    """aiosmtpd handler implementing the steering table in the module docstring."""

    def __init__(self, spool: Spool, lmtp: str | None, sent: SentFolder | None = None) -> None:
        self.spool = spool
        self.lmtp = lmtp
        self.sent = sent

    async def handle_RCPT(
        self,
        server: SinkSMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        m = RCPT_RE.fullmatch(local_part(address))
        if m:
            code = m[1]
            self.spool.record(
                {
                    "n": self.spool.next_number(),
                    "mail_from": envelope.mail_from,
                    "rcpt_tos": [address],
                    "outcome": f"rcpt-{code}",
                    "connection": server.connection,
                    "data_started_at": None,
                    "terminator_at": None,
                    "bytes": None,
                    "stored": False,
                }
            )
            text = "4.2.0 try again later" if code[0] == "4" else "5.1.1 no such user"
            return f"{code} {text} (sink)"
        stall = STALL_RE.fullmatch(local_part(address))
        if stall:
            await asyncio.sleep(float(stall[1]))
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SinkSMTP, session: Session, envelope: Envelope) -> str:
        terminator_at = time.time()
        server.terminator_seen = True
        content = envelope.original_content or b""
        locals_ = [local_part(r) for r in envelope.rcpt_tos]
        reject = next((m[1] for lp in locals_ if (m := DATA_RE.fullmatch(lp))), None)
        delays = [float(m[1]) for lp in locals_ if (m := SLOW_RE.fullmatch(lp))]
        if reject:
            outcome = f"rejected-{reject}"
        elif "vanish" in locals_:
            outcome = "vanished"
        elif "drop" in locals_:
            outcome = "dropped"
        elif "hang" in locals_:
            outcome = "hang"
        elif delays:
            outcome = "slow"
        else:
            outcome = "accepted"
        n = self.spool.next_number()
        stored = reject is None and outcome != "vanished"
        if stored:
            self.spool.store(n, content)
        filed = None
        if stored and self.sent is not None:  # like Gmail: the Sent copy exists before the 250
            filed = await asyncio.to_thread(self.sent.append, content)
        self.spool.record(
            {
                "n": n,
                "mail_from": envelope.mail_from,
                "rcpt_tos": list(envelope.rcpt_tos),
                "outcome": outcome,
                "connection": server.connection,
                "data_started_at": server.data_started_at,
                "terminator_at": terminator_at,
                "bytes": len(content),
                "stored": stored,
                "filed": filed,
            }
        )
        if reject:
            text = "4.3.0 temporary failure" if reject[0] == "4" else "5.7.1 message rejected"
            return f"{reject} {text} (sink)"
        if outcome == "vanished":
            return abort_without_reply(server)
        if filed is False:
            return "451 4.3.0 the Sent copy could not be filed (sink)"
        if self.lmtp:
            host, port = self.lmtp.rsplit(":", 1)
            await asyncio.to_thread(lmtp_deliver, host, int(port), envelope, content)
        if outcome == "dropped":
            return abort_without_reply(server)  # stored, but the client never sees a reply
        if outcome == "hang":
            await asyncio.Event().wait()  # cancelled when the client disconnects
        if delays:
            await asyncio.sleep(max(delays))
        return f"250 2.0.0 OK queued as sink-{n}"

    def record_incomplete(
        self, envelope: Envelope, data_started_at: float | None, connection: int
    ) -> None:
        """Record a DATA whose final dot never arrived (the client went away)."""
        self.spool.record(
            {
                "n": self.spool.next_number(),
                "mail_from": envelope.mail_from,
                "rcpt_tos": list(envelope.rcpt_tos),
                "outcome": "incomplete",
                "connection": connection,
                "data_started_at": data_started_at,
                "terminator_at": None,
                "bytes": None,
                "stored": False,
                "filed": None,
            }
        )


class XOAuth2Handler(SinkHandler):
    """The sink shaped like Gmail's submission server: XOAUTH2 with a signed JWT, nothing else."""

    def __init__(
        self,
        spool: Spool,
        lmtp: str | None,
        sent: SentFolder | None,
        bearer: BearerRules,
    ) -> None:
        super().__init__(spool, lmtp, sent)
        self.bearer = bearer

    async def auth_XOAUTH2(self, server: SMTP, args: list[str]) -> AuthResult:
        """AUTH XOAUTH2 [initial response]; aiosmtpd offers every auth_* handler method."""
        if len(args) == 1:
            blob = await server.challenge_auth("")
            if blob is MISSING:
                return AuthResult(success=False, handled=True)
        else:
            try:
                blob = base64.b64decode(args[1], validate=True)
            except (binascii.Error, ValueError):
                await server.push("501 5.5.2 Can't decode base64")
                return AuthResult(success=False, handled=True)
        user = self.bearer.user_if_valid(blob)
        if user is not None:
            return AuthResult(success=True, auth_data=LoginPassword(user.encode(), b""))
        answer = await server.challenge_auth(XOAUTH2_ERROR)
        if answer is MISSING:  # aiosmtpd has already replied 501
            return AuthResult(success=False, handled=True)
        return AuthResult(success=False, handled=False, message=XOAUTH2_REFUSED)


def abort_without_reply(server: SMTP) -> str:
    """Abort the connection; the reply returned is never delivered (the transport is gone)."""
    transport = server.transport
    assert isinstance(transport, asyncio.Transport)
    transport.abort()
    return "421 4.4.2 connection dropped (sink)"


def lmtp_deliver(host: str, port: int, envelope: Envelope, content: bytes) -> None:
    """Relay a stored message into Dovecot; unknown users are refused there, which is fine."""
    try:
        with smtplib.LMTP(host, port) as lmtp:
            lmtp.sendmail(envelope.mail_from or "", envelope.rcpt_tos, content)
    except (smtplib.SMTPException, OSError) as e:
        print(f"LMTP relay failed: {e!r}", file=sys.stderr, flush=True)


def authenticate(
    server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
) -> AuthResult:
    """Accept exactly alice@example.test / alicepw."""
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login == USERNAME
        and auth_data.password == PASSWORD
    )
    return AuthResult(success=ok, handled=False)


def announce_ready(path: str) -> None:
    """Write our pid to path (a tiny local file, once: no need to leave the event loop)."""
    with open(path, "w") as f:
        f.write(f"{os.getpid()}\n")


def make_handler(args: argparse.Namespace) -> SinkHandler:
    """The handler the options ask for: PLAIN for alice, or Gmail-shaped XOAUTH2."""
    spool = Spool(args.spool)
    sent = None
    if args.sent_imap:
        host, port = args.sent_imap.rsplit(":", 1)
        password = os.environ.get("SINK_SENT_PASSWORD", "")
        sent = SentFolder(host, int(port), args.sent_user, password, args.ca, args.sent_folder)
    if not args.xoauth2_user:
        return SinkHandler(spool, args.lmtp or None, sent)
    with open(args.xoauth2_key, encoding="ascii") as f:
        key = ECKey.import_key(f.read())
    bearer = BearerRules(args.xoauth2_user, key, args.xoauth2_kid, args.xoauth2_issuer)
    return XOAuth2Handler(spool, args.lmtp or None, sent, bearer)


async def serve(args: argparse.Namespace) -> None:
    """Serve until SIGTERM or SIGINT."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    handler = make_handler(args)
    # XOAUTH2 mode offers XOAUTH2 only; otherwise PLAIN (LOGIN is never offered).
    excluded = ["LOGIN", "PLAIN"] if isinstance(handler, XOAuth2Handler) else ["LOGIN"]
    loop = asyncio.get_running_loop()

    accepted = 0

    def factory(starttls: bool) -> SinkSMTP:
        nonlocal accepted
        accepted += 1
        # The implicit-TLS listener carries TLS from the first byte, but aiosmtpd tracks
        # STARTTLS only, hence auth_require_tls=False there. The STARTTLS listener requires the
        # upgrade before anything but EHLO/NOOP/QUIT, AUTH included.
        smtp = SinkSMTP(
            handler,
            hostname="localhost",
            ident="angelos test sink",
            tls_context=context if starttls else None,
            require_starttls=starttls,
            auth_required=True,
            auth_require_tls=starttls,
            auth_exclude_mechanism=excluded,
            authenticator=authenticate,
            data_size_limit=64 * 1024 * 1024,
        )
        smtp.connection = accepted
        return smtp

    warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    hosts: Sequence[str] = args.host or ["127.0.0.1"]
    servers = [
        await loop.create_server(lambda: factory(False), host=hosts, port=args.port, ssl=context)
    ]
    if args.starttls_port:
        servers.append(
            await loop.create_server(lambda: factory(True), host=hosts, port=args.starttls_port)
        )
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    ports = f"{args.port}" + (f" (STARTTLS {args.starttls_port})" if args.starttls_port else "")
    print(f"smtp sink on {hosts} port {ports} -> {args.spool}", flush=True)
    if args.ready:  # tells scripts/test-services that *this* process owns the ports
        announce_ready(args.ready)
    await stopping.wait()
    for server in servers:
        server.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="controllable SMTP sink for tests")
    parser.add_argument("--port", type=int, required=True, help="implicit-TLS port")
    parser.add_argument("--starttls-port", type=int, help="a second port, with STARTTLS")
    parser.add_argument("--host", action="append", help="listen address (repeatable)")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--spool", default=os.environ.get("SINK_DIR", "smtp-sink"))
    parser.add_argument("--lmtp", default=os.environ.get("SINK_LMTP"), help="HOST:PORT")
    parser.add_argument("--ready", help="file to write our pid to once listening")
    parser.add_argument("--xoauth2-user", help="offer XOAUTH2 only, for this user")
    parser.add_argument("--xoauth2-key", help="PEM public key that signs the bearer tokens")
    parser.add_argument("--xoauth2-kid", help="the key's kid")
    parser.add_argument("--xoauth2-issuer", help="the tokens' iss")
    parser.add_argument("--sent-imap", help="HOST:PORT of the IMAPS server for Sent copies")
    parser.add_argument("--sent-user", help="IMAP user (password: $SINK_SENT_PASSWORD)")
    parser.add_argument("--sent-folder", default="[Gmail]/Sent Mail")
    parser.add_argument("--ca", help="CA file the IMAPS server's certificate is checked against")
    args = parser.parse_args(argv)
    if args.xoauth2_user and not (args.xoauth2_key and args.xoauth2_kid and args.xoauth2_issuer):
        parser.error("--xoauth2-user needs --xoauth2-key, --xoauth2-kid and --xoauth2-issuer")
    if args.sent_imap and not (args.sent_user and args.ca):
        parser.error("--sent-imap needs --sent-user and --ca")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
