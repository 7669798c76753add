"""SMTP servers started inside a test, on loopback with the per-run test certificate.

`ScriptedServer` answers each command verb from a table, for replies a real server (aiosmtpd)
cannot be made to give.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

from providers.smtp import SmtpSettings
from schemas.secret import Secret
from support.services import Services

SENDER = "alice@example.test"


def server_tls(services: Services) -> ssl.SSLContext:
    """A server-side TLS context with the run's certificate for localhost."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(
        services.dir / "tls" / "server.crt", services.dir / "tls" / "server.key"
    )
    return context


def client_settings(services: Services, port: int, **changes: Any) -> SmtpSettings:
    """Submission settings for a test server on `port`, trusting the run's test CA."""
    base: dict[str, Any] = {
        "host": "localhost",
        "port": port,
        "tls_mode": "tls",
        "username": SENDER,
        "password": Secret("alicepw"),
        "ca_file": str(services.ca_file),
        "allow_private_hosts": True,
        "timeout_s": 5.0,
    }
    base.update(changes)
    return SmtpSettings(**base)


def sink_settings(services: Services, **changes: Any) -> SmtpSettings:
    """Submission settings for the run's SMTP sink, trusting the run's test CA."""
    base: dict[str, Any] = {
        "host": services.smtp_host,
        "port": services.smtp_port,
        "tls_mode": services.smtp_tls_mode,
        "username": services.username,
        "password": Secret(services.password),
        "ca_file": str(services.ca_file),
        "allow_private_hosts": True,
        "timeout_s": 10.0,
    }
    base.update(changes)
    return SmtpSettings(**base)


class ScriptedServer:
    """A TLS listener answering each command verb from a table; None closes the connection."""

    def __init__(self, context: ssl.SSLContext, **replies: bytes | None) -> None:
        self.context = context
        self.replies: dict[str, bytes | None] = {
            "greeting": b"220 scripted ESMTP\r\n",
            "EHLO": b"250-localhost\r\n250-SIZE 10000000\r\n250 AUTH PLAIN\r\n",
            "AUTH": b"235 2.7.0 ok\r\n",
            "MAIL": b"250 2.1.0 ok\r\n",
            "RCPT": b"250 2.1.5 ok\r\n",
            "DATA": b"354 go ahead\r\n",
            "final": b"250 2.0.0 queued\r\n",
            "RSET": b"250 2.0.0 reset\r\n",
            "QUIT": b"221 2.0.0 bye\r\n",
        }
        self.replies.update(replies)
        self.verbs: list[str] = []
        self.terminators = 0
        self.port = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for writer in self._writers:
            writer.close()

    async def _say(self, writer: asyncio.StreamWriter, key: str) -> bool:
        reply = self.replies[key]
        if reply is None:
            writer.close()
            return False
        writer.write(reply)
        await writer.drain()
        return True

    @property
    def connections(self) -> int:
        """How many connections were accepted so far."""
        return len(self._writers)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            if not await self._say(writer, "greeting"):
                return
            while line := await reader.readline():
                verb = line.split(b" ", 1)[0].strip().upper().decode()
                self.verbs.append(verb)
                if not await self._say(writer, verb if verb in self.replies else "QUIT"):
                    return
                if verb == "DATA" and (self.replies["DATA"] or b"").startswith(b"354"):
                    while (body_line := await reader.readline()) != b".\r\n":
                        if not body_line:
                            return
                    self.terminators += 1
                    if not await self._say(writer, "final"):
                        return
