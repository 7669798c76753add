"""A controllable SMTP sink for tests: implicit TLS, AUTH PLAIN required, steered by recipient.

The behaviour is chosen by each recipient's local part (case-insensitive):

  rcpt-NNN@..   reply NNN (4xx/5xx) to that RCPT
  data-NNN@..   accept the RCPT, reply NNN after DATA (nothing stored)
  drop@..       store the message, then abort the TCP connection without a reply
  slow-X@..     store, wait X seconds (X may be fractional, e.g. slow-0.5), then reply 250
  stall-X@..    wait X seconds before answering that RCPT (250): a send held before its DATA
  hang@..       store and never reply; the connection stays open until the client goes away
  anything else store and reply 250

Every DATA transaction is appended as one JSON line to $SPOOL/transactions.jsonl before any
reply is sent: n, mail_from, rcpt_tos, outcome ("accepted", "rejected-NNN", "dropped", "slow",
"hang", or "incomplete" when the client vanished before the final dot), connection (which
accepted connection carried it, numbered from 1), data_started_at (when the DATA command
arrived), terminator_at (when the final dot arrived), bytes, stored. A refused RCPT is a line
too (outcome "rcpt-NNN", no terminator). Stored messages are $SPOOL/<n>.eml, the exact bytes
received. With SINK_LMTP=host:port they are also relayed to Dovecot (best effort).

usage: smtp_sink.py --port PORT [--host 127.0.0.1 --host ::1] --cert CRT --key KEY
                    [--spool DIR (default $SINK_DIR)] [--lmtp HOST:PORT (default $SINK_LMTP)]
                    [--ready FILE (written with our pid once listening)]
"""

from __future__ import annotations

import argparse
import asyncio
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

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

USERNAME = b"alice@example.test"
PASSWORD = b"alicepw"

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

    data_started_at: float | None = None
    terminator_seen: bool = False
    connection: int = 0  # numbered per accepted connection, so tests can see session reuse

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

    def __init__(self, spool: Spool, lmtp: str | None) -> None:
        self.spool = spool
        self.lmtp = lmtp

    async def handle_RCPT(
        self,
        server: SMTP,
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
        elif "drop" in locals_:
            outcome = "dropped"
        elif "hang" in locals_:
            outcome = "hang"
        elif delays:
            outcome = "slow"
        else:
            outcome = "accepted"
        n = self.spool.next_number()
        stored = reject is None
        if stored:
            self.spool.store(n, content)
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
            }
        )
        if reject:
            text = "4.3.0 temporary failure" if reject[0] == "4" else "5.7.1 message rejected"
            return f"{reject} {text} (sink)"
        if self.lmtp:
            host, port = self.lmtp.rsplit(":", 1)
            await asyncio.to_thread(lmtp_deliver, host, int(port), envelope, content)
        if outcome == "dropped":
            transport = server.transport
            assert isinstance(transport, asyncio.Transport)
            transport.abort()  # stored, but the client never sees a reply
            return "421 4.4.2 connection dropped (sink)"  # never delivered: transport is gone
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
            }
        )


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


async def serve(args: argparse.Namespace) -> None:
    """Serve until SIGTERM or SIGINT."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    handler = SinkHandler(Spool(args.spool), args.lmtp or None)
    loop = asyncio.get_running_loop()

    accepted = 0

    def factory() -> SinkSMTP:
        nonlocal accepted
        accepted += 1
        # The listener is TLS-only, so AUTH always happens over TLS; aiosmtpd cannot see
        # implicit TLS (it tracks STARTTLS only), hence auth_require_tls=False.
        smtp = SinkSMTP(
            handler,
            hostname="localhost",
            ident="angelos test sink",
            auth_required=True,
            auth_require_tls=False,
            auth_exclude_mechanism=["LOGIN"],
            authenticator=authenticate,
            data_size_limit=64 * 1024 * 1024,
        )
        smtp.connection = accepted
        return smtp

    warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    hosts: Sequence[str] = args.host or ["127.0.0.1"]
    server = await loop.create_server(factory, host=hosts, port=args.port, ssl=context)
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    print(f"smtp sink on {hosts} port {args.port} -> {args.spool}", flush=True)
    if args.ready:  # tells scripts/test-services that *this* process owns the port
        announce_ready(args.ready)
    await stopping.wait()
    server.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="controllable SMTP sink for tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", action="append", help="listen address (repeatable)")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--spool", default=os.environ.get("SINK_DIR", "smtp-sink"))
    parser.add_argument("--lmtp", default=os.environ.get("SINK_LMTP"), help="HOST:PORT")
    parser.add_argument("--ready", help="file to write our pid to once listening")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
